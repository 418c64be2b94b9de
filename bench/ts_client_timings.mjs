// Timings through the TypeScript client (issue 20): spawn → ready line, → auth; reconnect + resume; shutdown.
// Run: (cd clients/typescript && npm run build) && node bench/ts_client_timings.mjs
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { SidecarClient } from "../clients/typescript/dist/index.js";
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
for (let run = 0; run < 5; run++) {
  const c = new SidecarClient({ command: [new URL("../.venv/bin/sidecar", import.meta.url).pathname], dataDir: mkdtempSync(join(tmpdir(), "sc-m-")),
    token: randomBytes(32).toString("base64url"), backoffMs: () => 0 });
  let t0 = process.hrtime.bigint(); let ready;
  c.once("ready", () => { ready = ms(t0); });
  await c.start();
  const authed = ms(t0);
  const connected = new Promise((r) => c.once("connected", r));
  t0 = process.hrtime.bigint();
  c["ws"].terminate();
  await connected;
  const reconnect = ms(t0);
  t0 = process.hrtime.bigint();
  const r = await c.shutdown();
  console.log(JSON.stringify({ run, spawn_to_ready_ms: +ready.toFixed(0), spawn_to_auth_ms: +authed.toFixed(0),
    reconnect_resume_ms: +reconnect.toFixed(1), shutdown_ms: +ms(t0).toFixed(0), exit: r.code }));
}
