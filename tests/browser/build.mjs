// Bundles entry.js with the SDK into dist/kinesis-sdk.js for index.html (run by tests/test_browser.py
// after `npm ci`; `node build.mjs` by hand). esbuild's JS API finds its native binary whether or not
// npm ran esbuild's install script.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
await build({
  absWorkingDir: here,
  entryPoints: ["entry.js"],
  bundle: true,
  platform: "browser", // the SDK's browser runtime config: FetchHttpHandler, no Node built-ins
  format: "iife",
  target: "es2020",
  outfile: "dist/kinesis-sdk.js",
  logLevel: "warning",
});
