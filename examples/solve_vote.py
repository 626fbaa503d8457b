import parallax

result = parallax.solve("Is 221 a prime number?", mode="vote")
print(result.status, result.answer)
print("reason:", result.reason or "none", "| vote counts:", result.vote_counts)
