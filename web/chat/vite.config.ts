import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `base: "./"`: the built page (dist/) works from any folder of any static server. One page, one bundle
// (~710 kB, ~200 kB gzipped, most of it @langchain/core, which useStream's messages need): no split to tune.
export default defineConfig({
  base: "./",
  plugins: [react()],
  server: { host: "127.0.0.1", port: 5173 },
  build: { chunkSizeWarningLimit: 1000 },
});
