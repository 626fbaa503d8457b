import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `base: "./"`: the built page (dist/) works from any folder of any static server.
export default defineConfig({
  base: "./",
  plugins: [react()],
  server: { host: "127.0.0.1", port: 5173 },
});
