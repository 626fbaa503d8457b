"""Build bench/data/reflections_dev.jsonl: a development set for `python -m bench.fidelity`.

PROVENANCE: these reflections are SYNTHETIC. They were written by hand for this repository (lesson
statements, paraphrases and failure descriptions below), modelled on the task types of ACE's Formula
set (ace-agent/ace, finance/data/formula_*.jsonl: "Use formula X to answer...", the formula names
listed there) and FiNER set (finance/data/finer_*.jsonl: XBRL tag prediction; the tags are real
US-GAAP tags that occur in its targets). They are NOT outputs of any model and do not come from real
solve runs. Each line is {"id", "text", "lesson"}: `text` reads like a solver's post-mortem ("<what
went wrong>. Lesson: <one sentence>"), `lesson` labels the distinct lesson it carries. Several
reflections share a lesson (paraphrased), and close cousins (gross vs operating vs net margin, ROE
vs ROA, Sharpe vs Sortino vs Treynor, stated vs effective interest rate tags, two different NPV
mistakes, ...) must stay apart.

Deterministic: `python bench/data/make_reflections.py` rewrites the same file (seed 7).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# (lesson label, failure descriptions, paraphrased lesson statements)
LESSONS: list[tuple[str, list[str], list[str]]] = [
    (
        "gross_margin",
        [
            (
                "it subtracted operating expenses before dividing, so the gross margin came out"
                " too low"
            ),
            "the answer used net income in the numerator of the gross margin",
        ],
        [
            (
                "Gross margin is (revenue - cost of goods sold) / revenue; operating expenses are"
                " not subtracted."
            ),
            "For gross profit margin only COGS comes off revenue, then divide by revenue.",
            (
                "Compute gross margin from gross profit (sales minus COGS) over sales, ignoring"
                " SG&A and other operating costs."
            ),
            (
                "Gross profit margin stops at cost of goods sold: revenue less COGS, divided by"
                " revenue."
            ),
            (
                "When the question asks for gross margin, never deduct operating expenses; use"
                " revenue minus COGS over revenue."
            ),
            (
                "Gross margin = gross profit / net sales, where gross profit = net sales - cost of"
                " goods sold."
            ),
        ],
    ),
    (
        "operating_margin",
        [
            "it divided gross profit by revenue and reported that as the operating margin",
            "operating expenses were left out of the operating margin",
        ],
        [
            (
                "Operating margin is operating income divided by revenue, and operating income"
                " already subtracts operating expenses."
            ),
            (
                "For operating margin take revenue minus COGS minus operating expenses (SG&A, R&D),"
                " then divide by revenue."
            ),
            (
                "Unlike gross margin, operating margin also removes operating expenses: operating"
                " income / revenue."
            ),
            "Operating margin uses operating income (EBIT before interest and taxes) over revenue.",
            "Compute operating profit margin as (revenue - COGS - operating expenses) / revenue.",
        ],
    ),
    (
        "net_margin",
        [
            "it stopped at operating income instead of going down to net income",
            "taxes and interest were not deducted, so the net profit margin was too high",
        ],
        [
            "Net profit margin is net income divided by revenue, after interest and taxes.",
            "For net margin use the bottom line: net income over total revenue.",
            "Net profit margin = net income / revenue; deduct interest and taxes before dividing.",
            (
                "Unlike operating margin, net profit margin takes income after interest expense and"
                " income tax, over revenue."
            ),
            "Divide net income (not operating income) by revenue to get the net margin.",
        ],
    ),
    (
        "return_on_equity",
        [
            "it divided net income by total assets when the question asked for ROE",
            "return on equity came out far too small because assets were used",
        ],
        [
            "ROE = net income / shareholders' equity, not total assets.",
            "Return on equity divides net income by shareholders' equity.",
            (
                "For return on equity the denominator is equity (assets minus liabilities), never"
                " total assets."
            ),
            "Compute ROE as net income over average or ending shareholders' equity as given.",
            (
                "Return on equity uses equity in the denominator; dividing by assets gives ROA"
                " instead."
            ),
        ],
    ),
    (
        "return_on_assets",
        [
            "it divided net income by equity when the question asked for ROA",
            "the return on assets used shareholders' equity as denominator",
        ],
        [
            "ROA = net income / total assets, not shareholders' equity.",
            "Return on assets divides net income by total assets.",
            (
                "For return on assets the denominator is total assets; equity in the denominator"
                " gives ROE."
            ),
            "Compute ROA as net income over total assets.",
            "Return on assets uses all assets in the denominator, not just the owners' equity.",
        ],
    ),
    (
        "return_on_investment",
        [
            "it left the renovation costs out of the investment cost",
            "ROI was computed as gain over sale price instead of over cost",
        ],
        [
            (
                "ROI = (gain from investment - cost of investment) / cost of investment, where cost"
                " includes every extra outlay."
            ),
            (
                "For return on investment divide the net gain by the total cost, and add renovation"
                " or extra spending to the cost."
            ),
            (
                "Return on investment is profit over total money invested; the denominator is cost,"
                " not the sale price."
            ),
            (
                "Compute ROI as (proceeds - total cost) / total cost, counting all additional costs"
                " in total cost."
            ),
            (
                "ROI uses the full cost basis (purchase plus additional spending) in both the"
                " subtraction and the denominator."
            ),
        ],
    ),
    (
        "current_ratio",
        [
            "it removed inventory from current assets when computing the current ratio",
            "the current ratio was inverted (liabilities over assets)",
        ],
        [
            "Current ratio = current assets / current liabilities, inventory included.",
            (
                "For the current ratio divide all current assets by current liabilities; do not"
                " strip out inventory."
            ),
            (
                "The current ratio keeps inventory in the numerator: current assets over current"
                " liabilities."
            ),
            "Compute current ratio with current assets on top and current liabilities below.",
            (
                "Current ratio is assets over liabilities (both current); excluding inventory is"
                " the quick ratio, not this one."
            ),
        ],
    ),
    (
        "quick_ratio",
        [
            "it kept inventory in the numerator of the quick ratio",
            "the acid-test ratio was computed exactly like the current ratio",
        ],
        [
            "Quick ratio = (current assets - inventory) / current liabilities.",
            (
                "For the acid-test ratio exclude inventory from current assets before dividing by"
                " current liabilities."
            ),
            (
                "The quick ratio removes inventory (and prepaid expenses if given) from current"
                " assets."
            ),
            (
                "Compute quick ratio as cash, marketable securities and receivables over current"
                " liabilities."
            ),
            "Unlike the current ratio, the quick ratio leaves inventory out of the numerator.",
        ],
    ),
    (
        "working_capital",
        [
            "it reported working capital as a ratio of assets to liabilities",
            "working capital was divided instead of subtracted",
        ],
        [
            "Working capital = current assets - current liabilities, a dollar amount, not a ratio.",
            "For working capital subtract current liabilities from current assets.",
            (
                "Working capital is a difference (current assets minus current liabilities), so the"
                " answer is in dollars."
            ),
            "Compute working capital by subtraction; dividing gives the current ratio instead.",
        ],
    ),
    (
        "debt_to_equity",
        [
            "it divided debt by total assets instead of by equity",
            "the debt-to-equity ratio was inverted",
        ],
        [
            "Debt-to-equity ratio = total liabilities / shareholders' equity.",
            "For debt to equity divide total debt by total equity, not by assets.",
            "The D/E ratio puts debt in the numerator and shareholders' equity in the denominator.",
            (
                "Compute debt-to-equity as total liabilities over shareholders' equity; debt over"
                " assets is a different ratio."
            ),
        ],
    ),
    (
        "interest_coverage",
        [
            "it used net income instead of EBIT for interest coverage",
            "interest coverage divided interest by EBIT (inverted)",
        ],
        [
            "Interest coverage ratio = EBIT / interest expense.",
            (
                "For the interest coverage ratio divide earnings before interest and taxes by"
                " interest expense."
            ),
            "Interest coverage uses EBIT, not net income, over the interest expense.",
            (
                "Compute times interest earned as operating earnings (EBIT) divided by interest"
                " expense."
            ),
        ],
    ),
    (
        "dscr",
        [
            "it divided by interest only instead of total debt service",
            "the DSCR left principal repayments out of debt service",
        ],
        [
            (
                "DSCR = net operating income / total debt service, and debt service includes"
                " principal and interest."
            ),
            "For the debt service coverage ratio divide NOI by principal plus interest payments.",
            (
                "Debt service coverage ratio uses the whole debt service (principal + interest) in"
                " the denominator."
            ),
            (
                "Compute DSCR as net operating income over total annual debt payments, not over"
                " interest alone."
            ),
        ],
    ),
    (
        "sharpe_ratio",
        [
            "it divided the excess return by beta when the question asked for the Sharpe ratio",
            "the Sharpe ratio used downside deviation",
        ],
        [
            (
                "Sharpe ratio = (portfolio return - risk-free rate) / standard deviation of the"
                " portfolio returns."
            ),
            (
                "For the Sharpe ratio divide the excess return by total volatility (standard"
                " deviation)."
            ),
            (
                "The Sharpe ratio uses the full standard deviation, not beta and not downside"
                " deviation."
            ),
            "Compute Sharpe as (Rp - Rf) / sigma_p.",
            (
                "Sharpe ratio: excess return over the risk-free rate, divided by the standard"
                " deviation of returns."
            ),
        ],
    ),
    (
        "sortino_ratio",
        [
            "it used the total standard deviation for the Sortino ratio",
            "the Sortino ratio was computed like a Sharpe ratio",
        ],
        [
            "Sortino ratio = (portfolio return - risk-free rate) / downside deviation.",
            (
                "For the Sortino ratio divide the excess return by downside deviation only, not"
                " total standard deviation."
            ),
            "The Sortino ratio penalises only downside volatility: (Rp - Rf) / downside deviation.",
            (
                "Compute Sortino with the downside deviation in the denominator; the full standard"
                " deviation gives Sharpe."
            ),
            (
                "Sortino ratio: excess return over the target or risk-free rate, divided by the"
                " downside risk."
            ),
        ],
    ),
    (
        "treynor_ratio",
        [
            "it divided by the standard deviation when the Treynor ratio needs beta",
            "the Treynor ratio forgot to subtract the risk-free rate",
        ],
        [
            "Treynor ratio = (portfolio return - risk-free rate) / beta.",
            (
                "For the Treynor ratio divide the excess return by the portfolio beta, not by"
                " volatility."
            ),
            "The Treynor ratio measures excess return per unit of systematic risk (beta).",
            "Compute Treynor as (Rp - Rf) / beta_p.",
            (
                "Treynor ratio uses beta in the denominator; standard deviation there gives the"
                " Sharpe ratio."
            ),
        ],
    ),
    (
        "jensens_alpha",
        [
            "it reported the CAPM expected return instead of the alpha",
            "Jensen's alpha forgot to multiply the market premium by beta",
        ],
        [
            (
                "Jensen's alpha = actual portfolio return - [risk-free rate + beta x (market return"
                " - risk-free rate)]."
            ),
            (
                "For Jensen's alpha subtract the CAPM expected return from the realised portfolio"
                " return."
            ),
            "Jensen's alpha is the return above what CAPM predicts: Rp - (Rf + beta(Rm - Rf)).",
            "Compute Jensen's alpha as realised return minus CAPM required return.",
        ],
    ),
    (
        "capm",
        [
            "it multiplied beta by the market return instead of the market risk premium",
            "the CAPM answer forgot to add back the risk-free rate",
        ],
        [
            "CAPM expected return = risk-free rate + beta x (market return - risk-free rate).",
            (
                "For CAPM multiply beta by the market risk premium (Rm - Rf), then add the"
                " risk-free rate."
            ),
            (
                "In the capital asset pricing model beta scales the market premium, not the raw"
                " market return."
            ),
            "Compute the CAPM required return as Rf + beta(Rm - Rf).",
            "CAPM: add the risk-free rate to beta times the excess market return.",
        ],
    ),
    (
        "npv_discount_first_year",
        [
            "the first year's cash flow was left undiscounted in the NPV",
            "cash flows were discounted starting at exponent 0",
        ],
        [
            (
                "NPV: discount the first year's cash flow by (1 + r)^1; period t uses exponent t"
                " starting at 1."
            ),
            (
                "For net present value the cash flow in year 1 is divided by (1 + r), not taken at"
                " face value."
            ),
            "In NPV every future cash flow is discounted, the first one by one full period.",
            (
                "Net present value: the exponent for the year-t cash flow is t, so year 1 already"
                " gets discounted once."
            ),
            (
                "Compute NPV with the first future cash flow discounted one period; only time-0"
                " amounts stay undiscounted."
            ),
        ],
    ),
    (
        "npv_initial_outlay",
        [
            "the initial investment was not subtracted from the NPV",
            "the upfront cost was discounted like a future cash flow",
        ],
        [
            "NPV: subtract the initial investment at time 0 without discounting it.",
            (
                "For net present value take the sum of discounted future cash flows minus the"
                " upfront investment."
            ),
            "The initial outlay in NPV is a time-0 cash flow: subtract it at full value.",
            (
                "Net present value must net off the initial cost; do not discount the upfront"
                " investment."
            ),
            "Compute NPV as PV of inflows minus the initial investment paid today.",
        ],
    ),
    (
        "present_value",
        [
            "it multiplied by (1 + r)^n instead of dividing when asked for present value",
            "the present value came out larger than the future amount",
        ],
        [
            "Present value = future value / (1 + r)^n; divide, never multiply.",
            "For PV discount the future amount: FV divided by (1 + rate) to the power of periods.",
            "The present value of a future sum is smaller than the sum: PV = FV / (1 + r)^n.",
            "Compute present value by dividing the future cash amount by the compounding factor.",
        ],
    ),
    (
        "future_value",
        [
            "it compounded annually although the question said monthly",
            "the future value used the annual rate per month",
        ],
        [
            (
                "Future value = PV x (1 + r/m)^(m x years): use the rate per period and the number"
                " of periods."
            ),
            (
                "For FV with monthly compounding divide the annual rate by 12 and multiply years"
                " by 12."
            ),
            (
                "Future value compounding must match the frequency: periodic rate and total"
                " periods, not annual figures."
            ),
            (
                "Compute future value with the per-period rate and the total count of compounding"
                " periods."
            ),
            "FV = PV(1 + i)^n where i and n are per compounding period, not per year.",
        ],
    ),
    (
        "compound_interest",
        [
            (
                "it reported the final balance when the question asked for the compound interest"
                " earned"
            ),
            "compound interest was computed with simple interest",
        ],
        [
            (
                "Compound interest earned = P(1 + r/n)^(nt) - P; subtract the principal when asked"
                " for interest only."
            ),
            "For compound interest, the interest is the final amount minus the principal.",
            (
                "Compound interest: compute the accumulated amount, then take away the principal to"
                " get the interest."
            ),
            (
                "When the question asks for compound interest (not the balance), subtract P from"
                " P(1 + r/n)^(nt)."
            ),
        ],
    ),
    (
        "simple_interest",
        ["it used months as years in simple interest", "simple interest was compounded"],
        [
            (
                "Simple interest = principal x rate x time, with time in years (convert months to"
                " years)."
            ),
            "For simple interest there is no compounding: P x r x t, and t must be in years.",
            "Simple interest: 18 months is 1.5 years; multiply principal, annual rate and years.",
            "Compute simple interest as P*r*t with the annual rate and time expressed in years.",
        ],
    ),
    (
        "effective_annual_rate",
        [
            "it returned the nominal rate as the EAR",
            "the effective annual rate forgot to subtract 1",
        ],
        [
            "EAR = (1 + nominal rate / n)^n - 1.",
            (
                "For the effective annual rate compound the periodic rate over the year and"
                " subtract 1."
            ),
            (
                "The effective annual rate is higher than the nominal rate when compounding is more"
                " than yearly: (1 + i/n)^n - 1."
            ),
            "Compute EAR from the stated annual rate by compounding n times and subtracting one.",
            "Effective annual rate: (1 + APR/n)^n - 1, with n the compounding periods per year.",
        ],
    ),
    (
        "apr",
        [
            "it compounded the monthly rate when the question asked for APR",
            "APR was reported as the monthly rate",
        ],
        [
            "APR = periodic rate x number of periods per year, with no compounding.",
            "For the annual percentage rate multiply the monthly rate by 12; do not compound it.",
            "The APR annualises by simple multiplication; compounding gives the EAR instead.",
            "Compute APR as the per-period rate times periods in a year.",
        ],
    ),
    (
        "dividend_yield",
        [
            "it used the quarterly dividend without annualising it",
            "dividend yield was divided by EPS instead of price",
        ],
        [
            (
                "Dividend yield = annual dividends per share / price per share; annualise quarterly"
                " dividends (x4)."
            ),
            "For dividend yield divide the yearly dividend per share by the share price.",
            (
                "Dividend yield uses the market price in the denominator and the full-year dividend"
                " on top."
            ),
            (
                "Compute dividend yield as annual DPS over current share price; a quarterly payout"
                " must be multiplied by four."
            ),
            "Dividend yield: yearly dividend / stock price, not dividend / earnings.",
        ],
    ),
    (
        "dividend_payout_ratio",
        [
            "it divided dividends by the share price when asked for the payout ratio",
            "the payout ratio was inverted",
        ],
        [
            "Dividend payout ratio = dividends / net income (or DPS / EPS).",
            "For the payout ratio divide total dividends by net income, not by price.",
            "The dividend payout ratio compares dividends with earnings: DPS over EPS.",
            (
                "Compute dividend payout ratio as the share of earnings paid out: dividends / net"
                " income."
            ),
            (
                "Payout ratio uses earnings in the denominator; price in the denominator gives"
                " dividend yield."
            ),
        ],
    ),
    (
        "eps",
        [
            "it forgot to subtract preferred dividends from net income for EPS",
            "EPS used shares authorized instead of shares outstanding",
        ],
        [
            (
                "EPS = (net income - preferred dividends) / weighted average common shares"
                " outstanding."
            ),
            (
                "For earnings per share subtract preferred dividends before dividing by common"
                " shares outstanding."
            ),
            (
                "Earnings per share belongs to common shareholders: take preferred dividends off"
                " net income first."
            ),
            (
                "Compute EPS with weighted average shares outstanding, not shares authorized or"
                " issued."
            ),
        ],
    ),
    (
        "pe_ratio",
        ["it divided EPS by price (inverted P/E)", "the P/E ratio used book value per share"],
        [
            "P/E ratio = market price per share / earnings per share.",
            "For the price-to-earnings ratio divide the share price by EPS.",
            "The P/E ratio has price on top and EPS below; price over book value is P/B.",
            "Compute price to earnings as stock price divided by earnings per share.",
        ],
    ),
    (
        "pb_ratio",
        [
            "it used EPS instead of book value per share",
            "book value per share was not computed from equity and shares",
        ],
        [
            (
                "P/B ratio = market price per share / book value per share, with book value per"
                " share = equity / shares outstanding."
            ),
            "For price-to-book divide the share price by book value per share.",
            "The price-to-book ratio compares price with book equity per share, not with earnings.",
            (
                "Compute P/B by first getting book value per share (shareholders' equity / shares),"
                " then price over that."
            ),
        ],
    ),
    (
        "market_cap",
        [
            "it multiplied price by shares authorized instead of outstanding",
            "market capitalization used the book value per share",
        ],
        [
            "Market capitalization = share price x shares outstanding.",
            "For market cap multiply the current share price by the number of shares outstanding.",
            "Market capitalization uses market price, not book value, times shares outstanding.",
            "Compute market cap with shares outstanding, not shares authorized.",
        ],
    ),
    (
        "enterprise_value",
        [
            "cash was added to enterprise value instead of subtracted",
            "enterprise value ignored debt",
        ],
        [
            "Enterprise value = market capitalization + total debt - cash and equivalents.",
            "For enterprise value subtract cash; add debt to the market cap.",
            "EV adds debt to market cap and takes cash away.",
            "Compute enterprise value as equity value plus debt minus cash, never plus cash.",
        ],
    ),
    (
        "ev_ebitda",
        [
            "it divided market cap by EBITDA instead of enterprise value",
            "the EV/EBITDA multiple used EBIT",
        ],
        [
            "EV/EBITDA: divide enterprise value (not market cap) by EBITDA.",
            (
                "For the EV/EBITDA multiple the numerator is enterprise value and the denominator"
                " EBITDA, not EBIT."
            ),
            (
                "EV/EBITDA uses EBITDA (earnings before interest, taxes, depreciation and"
                " amortization) below enterprise value."
            ),
            (
                "Compute the EV to EBITDA ratio with enterprise value on top; market cap alone is"
                " wrong."
            ),
        ],
    ),
    (
        "gordon_growth_price",
        [
            (
                "it used the current dividend D0 instead of next year's D1 in the dividend discount"
                " model"
            ),
            "the DDM price divided by r + g",
        ],
        [
            "Dividend discount model (Gordon): price = D1 / (r - g), with D1 = D0 x (1 + g).",
            (
                "For the Gordon growth model grow the current dividend one year before dividing by"
                " (r - g)."
            ),
            (
                "In the dividend discount model the denominator is required return minus growth, "
                "and the numerator is next year's dividend."
            ),
            "Compute the DDM value with D1, not D0: D0(1 + g) / (r - g).",
        ],
    ),
    (
        "cost_of_equity_gordon",
        [
            "it solved for price instead of the cost of equity",
            "the cost of equity forgot to add the growth rate",
        ],
        [
            "Cost of equity (Gordon growth) = D1 / P0 + g.",
            (
                "For the cost of equity from the Gordon model divide next year's dividend by the"
                " price and add growth."
            ),
            "Cost of equity via the dividend growth model is the dividend yield on D1 plus g.",
            "Compute the cost of equity as D1/P0 + g, not as D1/(r - g).",
        ],
    ),
    (
        "wacc_after_tax_debt",
        [
            "the cost of debt was not adjusted for taxes in WACC",
            "WACC used book weights when market values were given",
        ],
        [
            "WACC: use the after-tax cost of debt, Rd x (1 - tax rate), weighted by D/V.",
            "For WACC multiply the cost of debt by (1 - tax rate) before weighting.",
            "Weighted average cost of capital: E/V x Re + D/V x Rd x (1 - Tc).",
            "Compute WACC with market-value weights and the tax shield on debt.",
        ],
    ),
    (
        "dso",
        [
            "it used 360 days when the question said a 365-day year",
            "days sales outstanding divided sales by receivables (inverted)",
        ],
        [
            "DSO = accounts receivable / total credit sales x number of days in the period.",
            (
                "For days sales outstanding divide receivables by credit sales and multiply by the"
                " days (365 unless told otherwise)."
            ),
            "Days sales outstanding converts the receivables-to-sales ratio into days.",
            "Compute DSO with receivables on top, credit sales below, times days in the period.",
        ],
    ),
    (
        "receivables_turnover",
        [
            "it used ending receivables instead of the average",
            "receivables turnover used total sales including cash sales",
        ],
        [
            "Accounts receivable turnover = net credit sales / average accounts receivable.",
            (
                "For receivables turnover average the beginning and ending receivables before"
                " dividing."
            ),
            (
                "AR turnover uses net credit sales over the average of opening and closing"
                " receivables."
            ),
            "Compute accounts receivable turnover with average receivables in the denominator.",
        ],
    ),
    (
        "inventory_turnover",
        [
            "it divided sales by inventory instead of cost of goods sold",
            "inventory turnover used ending inventory only",
        ],
        [
            "Inventory turnover = cost of goods sold / average inventory.",
            "For inventory turnover divide COGS (not sales) by average inventory.",
            "Inventory turnover uses COGS over the average of beginning and ending inventory.",
            "Compute inventory turnover with cost of goods sold in the numerator.",
        ],
    ),
    (
        "free_cash_flow",
        [
            "capital expenditures were added to operating cash flow",
            "free cash flow started from net income",
        ],
        [
            "Free cash flow = operating cash flow - capital expenditures.",
            "For FCF subtract capex from cash flow from operations.",
            "Free cash flow is what remains after capital spending: OCF minus capex.",
            "Compute free cash flow from operating cash flow, then take off capital expenditures.",
        ],
    ),
    (
        "operating_cash_flow",
        [
            "depreciation was subtracted instead of added back",
            "operating cash flow ignored the change in working capital",
        ],
        [
            (
                "Operating cash flow = net income + non-cash expenses (depreciation) - increase in"
                " working capital."
            ),
            "For OCF add depreciation back to net income and adjust for working capital changes.",
            "Operating cash flow adds back non-cash charges like depreciation and amortization.",
            (
                "Compute operating cash flow starting from net income, adding depreciation, "
                "then subtracting increases in working capital."
            ),
        ],
    ),
    (
        "purchasing_power_parity",
        [
            "the inflation ratio was inverted in PPP",
            "PPP used interest rates instead of inflation rates",
        ],
        [
            (
                "Purchasing power parity: expected future exchange rate = spot x (1 + domestic"
                " inflation) / (1 + foreign inflation)."
            ),
            "For PPP scale the spot rate by the ratio of the two countries' inflation factors.",
            (
                "Purchasing power parity uses inflation rates, not interest rates, to project the"
                " exchange rate."
            ),
            (
                "Compute the PPP exchange rate with inflation of the quote currency over inflation"
                " of the base currency."
            ),
        ],
    ),
    (
        "interest_rate_parity",
        [
            "interest rate parity used inflation rates",
            "the forward rate used the interest ratio upside down",
        ],
        [
            (
                "Interest rate parity: forward rate = spot x (1 + domestic interest rate) / (1 +"
                " foreign interest rate)."
            ),
            (
                "For IRP scale the spot rate by the ratio of interest factors, matching the quote"
                " direction."
            ),
            (
                "Interest rate parity uses nominal interest rates, not inflation, to get the"
                " forward rate."
            ),
            "Compute the IRP forward rate with the quote currency's interest factor on top.",
        ],
    ),
    (
        "put_call_parity",
        [
            "the strike was not discounted in put-call parity",
            "put-call parity was rearranged with the wrong sign",
        ],
        [
            "Put-call parity: C + K e^(-rT) = P + S; discount the strike to present value.",
            "For put-call parity use the present value of the strike, K e^(-rT), not K itself.",
            "Put-call parity: call plus PV(strike) equals put plus spot.",
            "Compute the missing option price from C - P = S - K e^(-rT).",
        ],
    ),
    (
        "black_scholes",
        [
            "time to expiry was given in months and used as years in Black-Scholes",
            "Black-Scholes used d1 in both normal CDF terms",
        ],
        [
            (
                "Black-Scholes: C = S N(d1) - K e^(-rT) N(d2), with T in years and N the standard"
                " normal CDF."
            ),
            (
                "For the Black-Scholes model convert time to expiry into years before computing d1"
                " and d2."
            ),
            "Black-Scholes needs both N(d1) and N(d2); d2 = d1 - sigma sqrt(T).",
            "Compute the Black-Scholes call with the strike discounted by e^(-rT) and N(d2).",
        ],
    ),
    (
        "modigliani_miller",
        [
            "the tax shield was left out of the levered firm value",
            "MM with taxes added debt instead of the tax shield",
        ],
        [
            "Modigliani-Miller with taxes: levered value = unlevered value + tax rate x debt.",
            (
                "For the MM theorem with corporate taxes add the debt tax shield (Tc x D) to the"
                " unlevered value."
            ),
            "Under Modigliani-Miller with taxes, leverage adds Tc times debt to firm value.",
            "Compute the levered firm value as V_U + Tc D, not V_U + D.",
        ],
    ),
    (
        "gdp_expenditure",
        ["imports were added in GDP", "GDP left out government spending"],
        [
            (
                "GDP (expenditure approach) = consumption + investment + government spending +"
                " (exports - imports)."
            ),
            "For GDP subtract imports; only net exports enter.",
            "Gross domestic product: C + I + G + net exports, with imports taken away.",
            "Compute GDP with exports minus imports, not exports plus imports.",
        ],
    ),
    (
        "balance_of_trade",
        [
            "the balance of trade was computed as imports minus exports",
            "a trade deficit was reported as a positive number",
        ],
        [
            "Balance of trade = exports - imports; a deficit is negative.",
            "For the balance of trade subtract imports from exports.",
            (
                "Balance of trade: exports minus imports, so more imports than exports gives a"
                " negative value."
            ),
            "Compute the trade balance as exports less imports and keep the sign.",
        ],
    ),
    (
        "unemployment_rate",
        [
            "the unemployment rate divided by total population",
            "the labour force omitted the unemployed",
        ],
        [
            (
                "Unemployment rate = unemployed / labour force, where labour force = employed +"
                " unemployed."
            ),
            "For the unemployment rate divide by the labour force, not the whole population.",
            "Unemployment rate uses employed plus unemployed in the denominator.",
            "Compute unemployment rate with the labor force as denominator.",
        ],
    ),
    (
        "ratios_as_decimals",
        [
            "the answer was given as 25 when 0.25 was expected",
            "a percentage was returned where the checker wanted a decimal",
        ],
        [
            (
                "When a numerical answer is asked for, give rates and ratios as decimals (0.25),"
                " not percentages (25)."
            ),
            "Report percentages as decimal fractions: 7% is 0.07 in the answer.",
            "Answers are compared as plain numbers, so write a 12.5% result as 0.125.",
            (
                "Do not multiply by 100: express returns and margins as decimals unless the"
                " question asks for a percent."
            ),
        ],
    ),
    (
        "round_at_end",
        [
            "intermediate values were rounded, and the final answer drifted",
            "rounding each step to two decimals changed the last digit",
        ],
        [
            (
                "Round only the final answer to the requested decimals; keep full precision in"
                " intermediate steps."
            ),
            "Keep intermediate results unrounded and round once at the end.",
            (
                "Rounding every step accumulates error: carry full precision and round the final"
                " number only."
            ),
            "Do the whole calculation at full precision, then round to two decimal places.",
        ],
    ),
    # FiNER: XBRL tag choices
    (
        "xbrl_stated_rate",
        [
            "the coupon rate of the notes was tagged with the effective rate tag",
            "a stated interest rate was tagged as a basis spread",
        ],
        [
            (
                "Tag a note's coupon or stated interest rate with"
                " DebtInstrumentInterestRateStatedPercentage."
            ),
            (
                "For the contractual (stated) rate of a debt instrument use"
                " DebtInstrumentInterestRateStatedPercentage."
            ),
            (
                "Fixed rates such as '5.25% senior notes' take"
                " DebtInstrumentInterestRateStatedPercentage."
            ),
            (
                "The interest rate written in the note's name is the stated rate:"
                " DebtInstrumentInterestRateStatedPercentage."
            ),
            (
                "Use DebtInstrumentInterestRateStatedPercentage for the nominal coupon of bonds and"
                " notes."
            ),
        ],
    ),
    (
        "xbrl_effective_rate",
        [
            "the effective interest rate was tagged as the stated rate",
            "an effective yield after discount amortization got the coupon tag",
        ],
        [
            (
                "Tag an effective interest rate (after discounts and issuance costs) with"
                " DebtInstrumentInterestRateEffectivePercentage."
            ),
            (
                "For 'effective interest rate of x%' use"
                " DebtInstrumentInterestRateEffectivePercentage."
            ),
            (
                "When the filing says effective rate, choose"
                " DebtInstrumentInterestRateEffectivePercentage."
            ),
            (
                "DebtInstrumentInterestRateEffectivePercentage is for the effective rate including"
                " discount amortization."
            ),
        ],
    ),
    (
        "xbrl_basis_spread",
        [
            "the margin over LIBOR was tagged as the stated rate",
            "'SOFR plus 1.75%' was tagged with the interest rate tag",
        ],
        [
            (
                "Tag the margin over a variable reference rate (LIBOR/SOFR plus x%) with"
                " DebtInstrumentBasisSpreadOnVariableRate1."
            ),
            "For 'LIBOR plus 2.00%' the 2.00% is DebtInstrumentBasisSpreadOnVariableRate1.",
            (
                "A spread added to a floating benchmark rate is"
                " DebtInstrumentBasisSpreadOnVariableRate1."
            ),
            "Use DebtInstrumentBasisSpreadOnVariableRate1 for the basis spread on a variable rate.",
        ],
    ),
    (
        "xbrl_loc_max_capacity",
        [
            "the facility size was tagged as remaining borrowing capacity",
            "the maximum credit line amount was tagged as the outstanding balance",
        ],
        [
            (
                "Tag the total size of a revolving credit facility with"
                " LineOfCreditFacilityMaximumBorrowingCapacity."
            ),
            (
                "For 'a $500 million revolving credit facility' use"
                " LineOfCreditFacilityMaximumBorrowingCapacity."
            ),
            (
                "The facility limit is LineOfCreditFacilityMaximumBorrowingCapacity, not what is"
                " still available."
            ),
            (
                "Use LineOfCreditFacilityMaximumBorrowingCapacity for the maximum amount that may"
                " be borrowed."
            ),
        ],
    ),
    (
        "xbrl_loc_remaining",
        [
            "the undrawn availability was tagged as maximum borrowing capacity",
            "amount available under the revolver got the facility size tag",
        ],
        [
            (
                "Tag the amount still available to draw under a credit facility with"
                " LineOfCreditFacilityRemainingBorrowingCapacity."
            ),
            (
                "For 'had $120 million available for borrowing' use"
                " LineOfCreditFacilityRemainingBorrowingCapacity."
            ),
            (
                "Undrawn availability is LineOfCreditFacilityRemainingBorrowingCapacity, not the"
                " facility maximum."
            ),
            "Use LineOfCreditFacilityRemainingBorrowingCapacity for unused borrowing capacity.",
        ],
    ),
    (
        "xbrl_face_amount",
        [
            "the principal of the notes issued was tagged as carrying amount",
            "the face value of the debentures got the long-term debt tag",
        ],
        [
            "Tag the principal or face value of issued notes with DebtInstrumentFaceAmount.",
            "For '$300 million aggregate principal amount of notes' use DebtInstrumentFaceAmount.",
            (
                "The stated principal of a debt instrument is DebtInstrumentFaceAmount, not its"
                " carrying value."
            ),
            "Use DebtInstrumentFaceAmount for the face amount at issuance.",
        ],
    ),
    (
        "xbrl_carrying_amount",
        [
            "the book value net of discount was tagged as face amount",
            "carrying value of the notes got the principal tag",
        ],
        [
            (
                "Tag the balance-sheet value of debt net of discount and issuance costs with"
                " DebtInstrumentCarryingAmount."
            ),
            (
                "For the carrying value of notes use DebtInstrumentCarryingAmount, not the face"
                " amount."
            ),
            "Debt reported net of unamortized discount is DebtInstrumentCarryingAmount.",
            "Use DebtInstrumentCarryingAmount for the book value of a debt instrument.",
        ],
    ),
    (
        "xbrl_operating_segments",
        [
            "the number of operating segments was tagged as reportable segments",
            "'we operate in three segments' got the reportable segment tag",
        ],
        [
            "Tag the count of operating segments with NumberOfOperatingSegments.",
            "For 'the company has four operating segments' use NumberOfOperatingSegments.",
            (
                "Operating segments are counted with NumberOfOperatingSegments, reportable ones"
                " with a different tag."
            ),
            "Use NumberOfOperatingSegments when the text counts operating segments.",
        ],
    ),
    (
        "xbrl_reportable_segments",
        [
            "the reportable segment count was tagged as operating segments",
            "'two reportable segments' got the operating segment tag",
        ],
        [
            "Tag the count of reportable segments with NumberOfReportableSegments.",
            "For 'we have two reportable segments' use NumberOfReportableSegments.",
            (
                "Reportable segments are counted with NumberOfReportableSegments, not the operating"
                " segment tag."
            ),
            "Use NumberOfReportableSegments when the filing counts reportable segments.",
        ],
    ),
    (
        "xbrl_repurchase_authorized",
        [
            "the remaining authorization was tagged as the authorized amount",
            "the size of the buyback program got the remaining amount tag",
        ],
        [
            (
                "Tag the total size of a share repurchase program with"
                " StockRepurchaseProgramAuthorizedAmount1."
            ),
            (
                "For 'the board authorized a $1 billion buyback' use"
                " StockRepurchaseProgramAuthorizedAmount1."
            ),
            (
                "The authorized size of a stock repurchase program is"
                " StockRepurchaseProgramAuthorizedAmount1."
            ),
            (
                "Use StockRepurchaseProgramAuthorizedAmount1 for the amount the board approved for"
                " buybacks."
            ),
        ],
    ),
    (
        "xbrl_repurchase_remaining",
        [
            "the amount left under the buyback was tagged as the authorized amount",
            "remaining repurchase capacity got the program size tag",
        ],
        [
            (
                "Tag the amount still available under a share repurchase program with "
                "StockRepurchaseProgramRemainingAuthorizedRepurchaseAmount1."
            ),
            (
                "For '$250 million remained available for repurchases' use"
                " StockRepurchaseProgramRemainingAuthorizedRepurchaseAmount1."
            ),
            (
                "What is left of a buyback authorization is"
                " StockRepurchaseProgramRemainingAuthorizedRepurchaseAmount1."
            ),
            (
                "Use StockRepurchaseProgramRemainingAuthorizedRepurchaseAmount1 for the unused"
                " repurchase authorization."
            ),
        ],
    ),
    (
        "xbrl_effective_tax_rate",
        [
            "the federal statutory rate was tagged as the effective tax rate",
            "the 21% statutory rate got the effective rate tag",
        ],
        [
            (
                "Tag the company's effective income tax rate with"
                " EffectiveIncomeTaxRateContinuingOperations."
            ),
            (
                "For 'our effective tax rate was 23.4%' use"
                " EffectiveIncomeTaxRateContinuingOperations."
            ),
            (
                "The effective tax rate (tax expense over pre-tax income) is"
                " EffectiveIncomeTaxRateContinuingOperations."
            ),
            (
                "Use EffectiveIncomeTaxRateContinuingOperations for the effective rate, not the"
                " statutory one."
            ),
        ],
    ),
    (
        "xbrl_statutory_tax_rate",
        [
            "the 21% federal statutory rate was tagged as the effective rate",
            "statutory rate in the reconciliation got the wrong tag",
        ],
        [
            (
                "Tag the federal statutory rate in the tax reconciliation with "
                "EffectiveIncomeTaxRateReconciliationAtFederalStatutoryIncomeTaxRate."
            ),
            (
                "For 'the U.S. federal statutory rate of 21%' use"
                " EffectiveIncomeTaxRateReconciliationAtFederalStatutoryIncomeTaxRate."
            ),
            (
                "The statutory rate is"
                " EffectiveIncomeTaxRateReconciliationAtFederalStatutoryIncomeTaxRate, not the"
                " effective rate tag."
            ),
            (
                "Use EffectiveIncomeTaxRateReconciliationAtFederalStatutoryIncomeTaxRate for the"
                " 21% statutory federal rate."
            ),
        ],
    ),
]

OPENERS = [
    "The run failed because {f}.",
    "Wrong answer: {f}.",
    "Post-mortem: {f}.",
    "The solver got it wrong since {f}.",
    "The answer was off because {f}.",
    "Mistake: {f}.",
]


def build(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for label, fails, says in LESSONS:
        n = min(len(says), rng.randint(3, 6))
        for k, say in enumerate(rng.sample(says, n)):
            opener = rng.choice(OPENERS).format(f=fails[k % len(fails)])
            rows.append({"text": f"{opener} Lesson: {say}", "lesson": label})
    rng.shuffle(rows)
    return [{"id": f"r{i:03d}", **row} for i, row in enumerate(rows)]


if __name__ == "__main__":
    out = Path(__file__).with_name("reflections_dev.jsonl")
    rows = build()
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{out}: {len(rows)} reflections, {len({r['lesson'] for r in rows})} lessons")
