// The client against the REAL sidecar (issue 20 item 5): the checkout's .venv/bin/sidecar, or the
// frozen binary when SIDECAR_FROZEN points at it.  Generous timeouts only; the timings are printed.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { SidecarClient, RpcError, PROTOCOL, SHUTTING_DOWN } from "../dist/index.js";
import { generate } from "../scripts/gen.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const venv = join(here, "..", "..", "..", ".venv", "bin", "sidecar");
const command = process.env.SIDECAR_FROZEN ? [process.env.SIDECAR_FROZEN] : [venv];
const skip = !existsSync(command[0]) && `no sidecar at ${command[0]}`;
const events = JSON.parse(readFileSync(join(here, "..", "examples", "events.json"), "utf8"));

const clients = [];
function client(extra = {}) {
  const c = new SidecarClient({ command, dataDir: mkdtempSync(join(tmpdir(), "sc-ts-")), token: randomBytes(32).toString("base64url"),
    readyTimeoutMs: 120000, platformHandler: () => ({ online: [] }), ...extra });
  clients.push(c);
  return c;
}
// a test that failed or timed out leaves its sidecar (and the client's reconnect timers) alive, and
// Node waits for them forever: CI hung until pytest's own timeout (stop 31).  Stop every one.
after(() => {
  for (const c of clients) {
    c["stopping"] = true; // no restart, no reconnect
    c["ws"]?.terminate();
    c.child?.kill("SIGKILL");
  }
});
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

test("the checked-in types equal a fresh generation", { skip }, async () => {
  if (process.env.SIDECAR_FROZEN) return;
  const fresh = await generate();
  assert.equal(readFileSync(join(here, "..", "src", "generated", "protocol.ts"), "utf8"), fresh, "run `npm run gen`");
});

test("a whole session: login, a raw event of each project → task.created, acked; shutdown", { skip, timeout: 240000 }, async () => {
  const c = client();
  const created = [];
  c.onNotification("task.created", (p) => created.push(p));
  let t0 = process.hrtime.bigint();
  c.once("ready", () => console.log(`timing: spawn → ready line ${ms(t0).toFixed(0)} ms`));
  await c.start();
  console.log(`timing: ready line + auth ${ms(t0).toFixed(0)} ms`);
  // versioned auth: the sidecar's protocol and capabilities are exposed
  assert.equal(c.server.protocol.split(".")[0], PROTOCOL.split(".")[0]);
  assert.ok(c.server.capabilities.includes("platform.requests"), c.server.capabilities);
  assert.ok(c.server.capabilities.includes("shutdown"), c.server.capabilities);
  for (const e of events.logins) await c.request("session.login", e);
  for (const e of events.events) await c.request("platform.event", e);
  for (let i = 0; i < 600 && created.length < events.expect_tasks; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(created.length >= events.expect_tasks, `task.created: ${created.length}`);
  assert.deepEqual(created.map((p) => p.seq), created.map((_, i) => i + 1));
  assert.equal(c.lastAcked, created.at(-1).seq);
  // bad frames answered: a typed RpcError naming the field
  await assert.rejects(c.request("session.login", { tu: "g-tu-01", project: "goldn" }),
    (e) => e instanceof RpcError && e.code === -32602 && e.data?.field === "project");
  // reconnect: drop the socket, the client reconnects and resumes on the same stream
  const connected = new Promise((r) => c.once("connected", r));
  t0 = process.hrtime.bigint();
  c["ws"].terminate();
  const a = await connected;
  console.log(`timing: reconnect ${ms(t0).toFixed(0)} ms`);
  assert.equal(a.last_seq, created.at(-1).seq);
  // shutdown: the sidecar.shutdown request (the graceful path on Windows), answered once the store is closed
  t0 = process.hrtime.bigint();
  const r = await c.shutdown();
  console.log(`timing: shutdown ${ms(t0).toFixed(0)} ms`);
  assert.equal(r.code, 0);
  assert.deepEqual(r.answer, { ok: true, abandoned: [] });
});

test("a request after sidecar.shutdown is refused -32002 (nothing done), not -32603", { skip, timeout: 240000 }, async () => {
  const c = client();
  await c.start();
  const stop = c.request("sidecar.shutdown", {});
  const late = c.request("session.login", events.logins[0]);
  await assert.rejects(late, (e) => e instanceof RpcError && e.code === SHUTTING_DOWN && /nothing was done/.test(e.message));
  assert.deepEqual(await stop, { ok: true, abandoned: [] });
  assert.equal((await c.shutdown()).code, 0);
});

test("a SIGKILLed sidecar is restarted, its state restored", { skip, timeout: 240000 }, async () => {
  const c = client();
  c.resetTus.add(events.logins[0].tu);
  await c.start();
  for (const e of events.logins) await c.request("session.login", e);
  await c.request("platform.event", events.events[0]);
  const before = await c.listAllTasks(events.logins[0].tu);
  const reset = new Promise((r) => c.once("reset", r));
  c.child.kill("SIGKILL");
  await reset; // a new stream_id: the client re-read tasks.list and said so
  // the TU logs in again on the new process: its tasks come back from the store
  await c.request("session.login", events.logins[0]);
  const after = await c.listAllTasks(events.logins[0].tu);
  assert.ok(before.length > 0);
  assert.deepEqual(after.map((t) => t.task_id), before.map((t) => t.task_id));
  assert.equal((await c.shutdown()).code, 0);
});

test("a SIGKILL while the reconnect loop runs: the restart and the loop share one connection, reset said once", { skip, timeout: 240000 }, async () => {
  // the socket's close and the child's exit race: the reconnect loop (no backoff here) and the
  // restart both connected, the sidecar replaced the first connection (4409) and its close
  // rejected the other's pending auth / tasks.list, so "reset" never came (CI hang, stop 31)
  const c = client({ backoffMs: () => 5 });
  c.resetTus.add(events.logins[0].tu);
  await c.start();
  for (const e of events.logins) await c.request("session.login", e);
  await c.request("platform.event", events.events[0]);
  const before = await c.listAllTasks(events.logins[0].tu);
  let resets = 0, replaced = 0, connects = 0;
  c.on("reset", () => resets++);
  c.on("replaced", () => replaced++);
  c.on("connected", () => connects++);
  const reset = new Promise((r) => c.once("reset", r));
  c["ws"].terminate(); // the loop starts first, at the old port, every 5 ms
  c.child.kill("SIGKILL");
  await reset;
  await c.request("session.login", events.logins[0]);
  const after = await c.listAllTasks(events.logins[0].tu);
  assert.deepEqual(after.map((t) => t.task_id), before.map((t) => t.task_id));
  await new Promise((r) => setTimeout(r, 300)); // a second connection would have replaced this one by now
  assert.equal(c["ws"].readyState, 1);
  assert.deepEqual({ resets, replaced, connects }, { resets: 1, replaced: 0, connects: 1 });
  assert.equal((await c.shutdown()).code, 0);
});

test("an unsupported protocol major: refused naming the field, closed 4426, never reconnected", { skip, timeout: 240000 }, async () => {
  const c = client({ protocol: "2.0" });
  const unsupported = new Promise((r) => c.once("unsupported", r));
  const errors = [];
  c.on("error", (e) => errors.push(e));
  await assert.rejects(c.start(), (e) => e instanceof RpcError && e.code === -32602 && e.data?.field === "protocol"
    && e.data?.supported?.length === 1);
  assert.equal(await unsupported, 4426);
  await new Promise((r) => setTimeout(r, 300)); // a reconnect would have begun by now
  assert.ok(errors.some((e) => /4426/.test(e.message)));
  assert.equal(c["ws"].readyState, 3); // CLOSED, and no new socket was opened
  assert.equal((await c.shutdown()).code, 0);
});

test("tasks.list is read page by page to the end", { skip, timeout: 240000 }, async () => {
  const c = client({ pageSize: 1 });
  await c.start();
  for (const e of events.logins) await c.request("session.login", e);
  for (const e of events.events) await c.request("platform.event", e);
  const tu = events.logins[0].tu;
  const whole = await c.request("tasks.list", { tu });
  const paged = await c.listAllTasks(tu);
  assert.ok(Array.isArray(whole));
  assert.deepEqual(paged.map((t) => t.task_id), whole.map((t) => t.task_id));
  const first = await c.request("tasks.list", { tu, limit: 1 });
  assert.equal(first.tasks.length, Math.min(1, whole.length));
  assert.equal(whole.length > 1, "next_cursor" in first);
  assert.equal((await c.shutdown()).code, 0);
});

test("logs over the bridge: subscribe, the level changed live, renewed after a reconnect, unsubscribe", { skip, timeout: 240000 }, async () => {
  const c = client();
  await c.start();
  assert.ok(c.server.capabilities.includes("logs"), c.server.capabilities);
  const records = [];
  // a known INFO line: the sidecar logs "<method> failed: <error>" for each refused request, before
  // its answer — so a record sent for it has arrived by the time the request rejects
  const refused = async (marker) => {
    await assert.rejects(c.request("session.login", { tu: "g-tu-01", project: marker }), (e) => e instanceof RpcError && e.code === -32602);
    return records.filter((r) => r.msg.includes(marker));
  };
  const answer = await c.subscribeLogs("INFO", (r) => records.push(r));
  assert.deepEqual([answer.ok, answer.level, answer.process_level], [true, "INFO", "INFO"]);
  const [record] = await refused("marker-info-1");
  assert.equal(record.level, "INFO");
  assert.equal(record.logger, "bridge.server");
  assert.equal("seq" in record, false); // outside the stream: nothing to ack
  await c.subscribeLogs("ERROR", (r) => records.push(r)); // the level changes live
  assert.deepEqual(await refused("marker-error-2"), []);
  await c.subscribeLogs("INFO", (r) => records.push(r));
  const connected = new Promise((r) => c.once("connected", r));
  c["ws"].terminate(); // the sidecar ends the subscription with the connection; the client renews it
  await connected;
  assert.equal((await refused("marker-reconnected-3")).length, 1);
  await c.unsubscribeLogs();
  assert.deepEqual(await refused("marker-off-4"), []);
  assert.equal(c.lastAcked, 0); // no log record was ever a stream frame
  assert.equal((await c.shutdown()).code, 0);
});
