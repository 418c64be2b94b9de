// An Electron main process in miniature (issue 20 item 6), runnable with plain node after
// `npm ci` (which builds dist/):   node examples/main.mjs
// It spawns the sidecar (SIDECAR_BIN, or the checkout's .venv/bin/sidecar), logs a TU of each
// project in, feeds the recorded raw events of examples/events.json and prints the tasks.
// In Electron: dataDir = path.join(app.getPath("userData"), "sidecar").
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { SidecarClient } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const recorded = JSON.parse(readFileSync(join(here, "events.json"), "utf8"));
const dataDir = mkdtempSync(join(tmpdir(), "sidecar-example-")); // a throw-away one: removed at the end
const client = new SidecarClient({
  command: [process.env.SIDECAR_BIN ?? join(here, "..", "..", "..", ".venv", "bin", "sidecar")],
  dataDir,
  token: randomBytes(32).toString("base64url"),
  // the sidecar asks Electron to call a platform API; here: nobody is online
  platformHandler: async ({ project, method }) => (method === "online_ru" ? { online: [] } : {}),
});
client.onNotification("task.created", ({ seq, task }) => console.log(`task.created #${seq}: ${task.type} ${task.project} ${task.tu} ← ${task.ru}`));
const ready = await client.start();
console.log(`sidecar ${ready.version} ready on port ${ready.port} (pid ${ready.pid})`);
for (const login of recorded.logins) console.log("login", login.tu, await client.request("session.login", login));
for (const event of recorded.events) await client.request("platform.event", event);
await new Promise((r) => setTimeout(r, 500)); // let the stream deliver
for (const { tu } of recorded.logins) console.log(tu, JSON.stringify(await client.listAllTasks(tu), null, 1));
try {
  console.log("shutdown:", await client.shutdown());
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
