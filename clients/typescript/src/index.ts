// The Electron main process's client of the sidecar (issue 20 item 5; docs/protocol.md is the
// contract): spawn + ready line, connect + auth, typed requests, the resumable stream with acks,
// reconnect with backoff, restart of a crashed sidecar, platform.request answered by the app's
// handler, graceful shutdown.  Types come from src/generated/protocol.ts (`npm run gen`).
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { createInterface } from "node:readline";
import WebSocket from "ws";
import type { Requests, ServerNotifications, ServerRequests } from "./generated/protocol.js";

export type * from "./generated/protocol.js";

/** A JSON-RPC error the sidecar answered, typed: `code`, `message`, `data.field` when it names one. */
export class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: { field?: string; [k: string]: unknown }) {
    super(message);
    this.name = "RpcError";
  }
}

export interface ReadyLine { event: "ready"; port: number; pid: number; version: string; protocol: number }

/** The contract version this client was written against ("MAJOR.MINOR", docs/protocol.md "Versions"). */
export const PROTOCOL = "1.2";
/** What this client serves, sent in `auth`: it answers `platform.requests` (several requests, one round trip). */
export const CAPABILITIES = ["platform.requests"];
/** Error code: the sidecar is stopping and did nothing of this request (send it to the next process). */
export const SHUTTING_DOWN = -32002;
/** Error code: the sidecar stopped during this request; what it did is kept, `data` says how far (`now`, `taken`). */
export const CUT_SHORT = -32003;
/** Error code: a step failed — nothing of it was kept; the sidecar exits 6 and is restarted. */
export const INTERNAL_ERROR = -32603;
/** Close code: the sidecar does not speak this client's protocol major — never reconnect. */
export const CLOSE_UNSUPPORTED_PROTOCOL = 4426;

export interface SidecarOptions {
  /** the command line of the sidecar, e.g. [".venv/bin/sidecar"] or ["dist/sidecar/sidecar"] */
  command: string[];
  /** the data dir — in Electron `path.join(app.getPath('userData'), 'sidecar')` */
  dataDir: string;
  /** SIDECAR_TOKEN, given in the environment (never on the command line) */
  token: string;
  /** called on close 4401: return a new token (the sidecar is then restarted with it) */
  onTokenRejected?: () => Promise<string> | string;
  /** answers `platform.request`: (project, tu, method, params) → the platform's answer; throw to fail it */
  platformHandler?: (req: ServerRequests["platform.request"]["params"]) => Promise<unknown> | unknown;
  readyTimeoutMs?: number;     // default 30 000
  shutdownTimeoutMs?: number;  // default 10 000, then SIGKILL
  maxRestarts?: number;        // default 5
  backoffMs?: (attempt: number) => number; // default 100·2^n capped at 5 s
  /** rows per `tasks.list` page read by listAllTasks (default 500) */
  pageSize?: number;
  /** the protocol sent in `auth` (default PROTOCOL; tests only) */
  protocol?: string;
  extraArgs?: string[];
  env?: NodeJS.ProcessEnv;
}

/** A log level of `logs.subscribe` (logging's names). */
export type LogLevel = Requests["logs.subscribe"]["params"]["level"];
/** One `log` record: ts (unix seconds), level, logger, msg, exc?, dropped. */
export type LogRecord = ServerNotifications["log"];

type NoteHandler = { [M in keyof ServerNotifications]: (params: ServerNotifications[M]) => void };

/**
 * Events: "ready" (ReadyLine), "connected" ({stream_id, last_seq}), "reset" (tasks re-read after
 * a new stream_id: Task[] per TU asked via `resetTus`), "replaced" (4409: stop), "unsupported"
 * (4426: the sidecar does not speak our protocol major — stop, also an "error"), "restarted",
 * "exit" ({code, signal}), "stderr" (line), "logsFailed" (renewing the log subscription after a
 * reconnect failed), plus each server notification by method name ("log": see subscribeLogs).
 */
export class SidecarClient extends EventEmitter {
  child?: ChildProcess;
  ready?: ReadyLine;
  /** the sidecar's auth answer: its `protocol` ("MAJOR.MINOR") and `capabilities` (e.g. "platform.requests", "shutdown") */
  server?: { protocol: string; capabilities: string[] };
  private ws?: WebSocket;
  private nextId = 1;
  /** requests in flight, each with the connection it went out on (only that one's close fails it) */
  private pending = new Map<number, { ws: WebSocket; resolve: (v: any) => void; reject: (e: Error) => void }>();
  /** the one connection attempt in flight, and the port it goes to (see connect) */
  private connecting?: { port: number; done: Promise<Requests["auth"]["result"]> };
  private streamId?: string;
  /** the last seq handled and acked on the current stream; a frame at or below it is a duplicate */
  lastAcked = 0;
  private stopping = false;
  private restarts = 0;
  /** the TUs whose tasks a "reset" re-reads */
  resetTus = new Set<string>();
  /** the log subscription, renewed after every auth (the sidecar ends it with the connection) */
  private logs?: { level: LogLevel; handler: (record: LogRecord) => void };

  constructor(readonly opts: SidecarOptions) { super(); }

  private backoff(n: number) { return this.opts.backoffMs?.(n) ?? Math.min(5000, 100 * 2 ** n); }

  /** Spawns the sidecar, waits for its ready line, connects and authenticates. */
  async start(): Promise<ReadyLine> {
    const [cmd, ...args] = this.opts.command;
    const child = spawn(cmd, [...args, "serve", "--port", "0", "--data-dir", this.opts.dataDir, ...(this.opts.extraArgs ?? [])], {
      env: { ...process.env, ...this.opts.env, SIDECAR_TOKEN: this.opts.token },
      stdio: ["pipe", "pipe", "pipe"], // stdin EOF stops it: the parent's death stops the sidecar
    });
    this.child = child;
    createInterface({ input: child.stderr! }).on("line", (l) => this.emit("stderr", l));
    const ready = await new Promise<ReadyLine>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no ready line within the timeout")), this.opts.readyTimeoutMs ?? 30000);
      const rl = createInterface({ input: child.stdout! });
      rl.on("line", (line) => {
        try {
          const msg = JSON.parse(line);
          if (msg.event === "ready") { clearTimeout(timer); resolve(msg); }
        } catch { /* not the ready line */ }
      });
      child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`sidecar exited ${code} before its ready line`)); });
    });
    this.ready = ready;
    child.once("exit", (code, signal) => this.onExit(code, signal));
    this.emit("ready", ready);
    await this.connect();
    return ready;
  }

  private async onExit(code: number | null, signal: NodeJS.Signals | null) {
    this.emit("exit", { code, signal });
    this.child = undefined;
    if (this.stopping) return;
    if (this.restarts >= (this.opts.maxRestarts ?? 5)) { this.emit("error", new Error(`sidecar crashed ${this.restarts} times: not restarting`)); return; }
    await new Promise((r) => setTimeout(r, this.backoff(this.restarts++)));
    try { await this.start(); this.emit("restarted", this.ready); } catch (e) { this.emit("error", e); }
  }

  /**
   * Opens the websocket and sends `auth` — nothing else before its answer (pre-auth frames are capped).
   * One attempt at a time: a SIGKILLed sidecar closes the socket and exits at once, so the reconnect
   * loop and the restart both connect — two connections, the sidecar replaces the first (4409), and
   * its close failed the other's auth or `tasks.list`, so "reset" never came.  A call while an attempt
   * to the same port is in flight joins it; one to an old port (the restarted sidecar listens on a
   * new one) is waited out first.
   */
  async connect(): Promise<Requests["auth"]["result"]> {
    const port = this.ready!.port;
    while (this.connecting) {
      if (this.connecting.port === port) return this.connecting.done;
      await this.connecting.done.catch(() => undefined);
    }
    const done: Promise<Requests["auth"]["result"]> = this.openAndAuth(port).finally(() => {
      if (this.connecting?.done === done) this.connecting = undefined;
    });
    this.connecting = { port, done };
    return done;
  }

  private async openAndAuth(port: number): Promise<Requests["auth"]["result"]> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    this.ws = ws;
    await new Promise<void>((res, rej) => { ws.once("open", () => res()); ws.once("error", rej); });
    ws.on("message", (data) => this.onFrame(JSON.parse(String(data))));
    ws.on("close", (code) => this.onClose(ws, code));
    const auth = await this.request("auth", { token: this.opts.token, client: "electron", version: "0.1.0",
      protocol: this.opts.protocol ?? PROTOCOL, capabilities: CAPABILITIES });
    const a = auth as any;
    this.server = { protocol: a.protocol, capabilities: a.capabilities ?? [] };
    const fresh = this.streamId !== undefined && a.stream_id !== this.streamId;
    if (a.stream_id !== this.streamId) this.lastAcked = 0;
    this.streamId = a.stream_id;
    this.emit("connected", a);
    if (this.logs) { // a subscription is the connection's: ask again on this one
      try { await this.request("logs.subscribe", { level: this.logs.level }); } catch (e) { this.emit("logsFailed", e); }
    }
    if (fresh) {
      const tasks: Record<string, unknown[]> = {};
      for (const tu of this.resetTus) tasks[tu] = await this.listAllTasks(tu);
      this.emit("reset", tasks);
    }
    return auth;
  }

  /** `tasks.list` read to the end, page by page (`limit` + `cursor`; the last page has no `next_cursor`). */
  async listAllTasks(tu: string): Promise<unknown[]> {
    const out: unknown[] = [];
    let cursor: string | undefined = undefined;
    const limit = this.opts.pageSize ?? 500;
    for (;;) {
      const r: any = await this.request("tasks.list", cursor === undefined ? { tu, limit } : { tu, limit, cursor });
      out.push(...r.tasks);
      cursor = r.next_cursor;
      if (cursor === undefined) return out;
    }
  }

  private async onClose(ws: WebSocket, code: number) {
    for (const [id, p] of this.pending) {
      if (p.ws !== ws) continue; // a newer connection's request: not this close's to fail
      this.pending.delete(id);
      p.reject(new Error(`connection closed (${code})`));
    }
    if (ws !== this.ws || this.stopping || !this.child) return;
    if (code === 4409) { this.emit("replaced"); return; } // another window owns the sidecar
    if (code === CLOSE_UNSUPPORTED_PROTOCOL) { // a restart speaks the same major: never reconnect
      this.emit("unsupported", code);
      this.emit("error", new Error("the sidecar does not speak protocol " + (this.opts.protocol ?? PROTOCOL) + " (4426)"));
      return;
    }
    if (code === 4401) {
      if (!this.opts.onTokenRejected) { this.emit("error", new Error("token rejected (4401)")); return; }
      this.opts.token = await this.opts.onTokenRejected();
    }
    for (let n = 0; !this.stopping && this.child; n++) {
      await new Promise((r) => setTimeout(r, this.backoff(n)));
      if (this.ws !== ws && this.ws?.readyState === WebSocket.OPEN) return; // a restart connected meanwhile
      try { await this.connect(); return; } catch { /* retry with backoff */ }
    }
  }

  private async onFrame(msg: any) {
    if ("id" in msg && !("method" in msg)) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (!p) return;
      if (msg.error) p.reject(new RpcError(msg.error.code, msg.error.message, msg.error.data));
      else p.resolve(msg.result);
      return;
    }
    if ("id" in msg) return this.answer(msg);
    const seq = msg.params?.seq;
    if (typeof seq === "number" && seq <= this.lastAcked) return; // a resumed frame seen before
    this.emit(msg.method, msg.params);
    if (typeof seq === "number") { // ack after handling
      this.lastAcked = seq;
      this.ws?.send(JSON.stringify({ jsonrpc: "2.0", method: "stream.ack", params: { seq } }));
    }
  }

  private async answer(msg: any) {
    const reply = (body: object) => this.ws?.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...body }));
    const one = async (params: any) => {
      if (!this.opts.platformHandler) throw new RpcError(-32601, "no platform handler");
      return this.opts.platformHandler(params);
    };
    try {
      if (msg.method === "platform.request") reply({ result: await one(msg.params) });
      else if (msg.method === "platform.requests") { // CAPABILITIES: one result per request, in order
        const results = [];
        for (const r of msg.params.requests) {
          try { results.push({ result: await one(r) }); } catch (e: any) {
            results.push({ error: { code: e instanceof RpcError ? e.code : -32000, message: String(e?.message ?? e) } });
          }
        }
        reply({ result: { results } });
      }
      else reply({ error: { code: -32601, message: `unknown method ${msg.method}` } });
    } catch (e: any) {
      reply({ error: { code: e instanceof RpcError ? e.code : -32000, message: String(e?.message ?? e) } });
    }
  }

  /** A typed request: `client.request("session.login", {tu, project, operator})`. Rejects with RpcError. */
  request<M extends keyof Requests>(method: M, params: Requests[M]["params"]): Promise<Requests[M]["result"]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const ws = this.ws;
      if (!ws || ws.readyState !== WebSocket.OPEN) return reject(new Error("not connected"));
      this.pending.set(id, { ws, resolve, reject });
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  /**
   * The sidecar's log records at `level` or above, each to `handler` (a `log` notification: outside
   * the stream, no seq, best effort — `dropped` counts records lost before it). Calling it again
   * changes the level live (and the handler); the subscription is renewed after every reconnect.
   * Resolves with the answer: `process_level` is the sidecar's own `--log-level`, below which no
   * record is ever made.
   */
  async subscribeLogs(level: LogLevel, handler: (record: LogRecord) => void): Promise<Requests["logs.subscribe"]["result"]> {
    if (this.logs) this.off("log", this.logs.handler);
    this.logs = { level, handler };
    this.on("log", handler);
    return this.request("logs.subscribe", { level });
  }

  /** No more log records (the handler is removed at once). */
  async unsubscribeLogs(): Promise<void> {
    if (!this.logs) return;
    this.off("log", this.logs.handler);
    this.logs = undefined;
    await this.request("logs.unsubscribe", {});
  }

  /** Typed notification listeners. */
  onNotification<M extends keyof ServerNotifications>(method: M, fn: NoteHandler[M]): this {
    return this.on(method, fn as any);
  }

  /**
   * Graceful stop: `sidecar.shutdown` when the auth answer lists the "shutdown" capability (no
   * probing) — answered once the sidecar's store is closed, `abandoned` naming any close stage that
   * overran — else stdin EOF; SIGKILL after the timeout.  Resolves with the exit and that answer.
   */
  async shutdown(): Promise<{ code: number | null; signal: NodeJS.Signals | null; answer?: Requests["sidecar.shutdown"]["result"] }> {
    this.stopping = true;
    const child = this.child;
    if (!child) return { code: null, signal: null };
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once("exit", (code, signal) => r({ code, signal })));
    const timer = setTimeout(() => child.kill("SIGKILL"), this.opts.shutdownTimeoutMs ?? 10000);
    let answer: Requests["sidecar.shutdown"]["result"] | undefined;
    if (this.server?.capabilities.includes("shutdown")) {
      try { answer = await this.request("sidecar.shutdown", {}); } catch { /* connection gone: stdin EOF below */ }
    }
    child.stdin?.end(); // after the answer the process is exiting anyway; without one this stops it
    const r = await exited;
    clearTimeout(timer);
    return answer === undefined ? r : { ...r, answer };
  }
}
