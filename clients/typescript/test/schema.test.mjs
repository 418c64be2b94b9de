// The bridge contract in Node (issue 20 item 2): `sidecar schema` compiles in ajv's strict mode —
// every $def, the root included — and the frames a real replay exchanged validate, each against
// the $def of what it is (its method; an answer by the method of the request it answers).
//
// The pytest wrapper (tests/clients/test_typescript.py) writes the schema from `sidecar schema`
// and a replay's captured frames to temp files and passes them here:
//   SIDECAR_SCHEMA=<schema.json>  SIDECAR_FRAMES=<frames.jsonl, optional>  npm test
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const schemaPath = process.env.SIDECAR_SCHEMA;
const framesPath = process.env.SIDECAR_FRAMES;
const why = "set SIDECAR_SCHEMA (run through pytest tests/clients, or `sidecar schema > f; SIDECAR_SCHEMA=f npm test`)";

function load() {
  const doc = JSON.parse(readFileSync(schemaPath, "utf8"));
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addSchema(doc);
  const get = (name) => ajv.getSchema(`${doc.$id}#/$defs/${name}`);
  return { doc, ajv, get };
}

test("the schema compiles in ajv strict mode, every def and the root", { skip: !schemaPath && why }, () => {
  const { doc, ajv, get } = load();
  assert.equal(doc.$schema, "https://json-schema.org/draft/2020-12/schema");
  assert.ok(ajv.getSchema(doc.$id), "the root");
  const failed = [];
  for (const name of Object.keys(doc.$defs)) {
    try { get(name); } catch (e) { failed.push(`${name}: ${e.message}`); }
  }
  assert.deepEqual(failed, []);
  const methods = Object.keys(doc.$defs).filter((n) => /^(in|out)\.[^]+$/.test(n) && !/\.(result|error|notification)$/.test(n));
  console.log(`ajv strict: ${Object.keys(doc.$defs).length} defs compiled, ${methods.length} methods`);
});

// the $def names a frame must match (tests/contract/frames.py's rules, the same ones)
function defsOf(dir, frame, asked) {
  if (dir === "ready") return [["ReadyLine", frame]];
  const side = dir === "to_sidecar" ? "in" : "out";
  if ("method" in frame) {
    if (!("id" in frame)) return [[side === "in" ? `in.${frame.method}.notification` : `out.${frame.method}`, frame]];
    const p = frame.params ?? {};
    asked.set(`${dir}:${JSON.stringify(frame.id)}`,
      side === "out" && frame.method === "platform.request" ? [frame.method, p.project, p.method] : [frame.method]);
    return [[`${side}.${frame.method}`, frame]];
  }
  const other = dir === "to_sidecar" ? "to_electron" : "to_sidecar";
  const key = `${other}:${JSON.stringify(frame.id)}`;
  const method = asked.get(key);
  asked.delete(key);
  const kind = "error" in frame ? "error" : "result";
  if (!method) return [[kind === "error" ? "jsonrpc.Error" : "jsonrpc.Result", frame]];
  if (method.length === 3) {
    const out = [[`out.platform.request.${kind}`, frame]];
    if (kind === "result") out.push([`answer.${method[1]}.${method[2]}`, frame.result]);
    return out;
  }
  return [[side === "out" ? `in.${method[0]}.${kind}` : `out.${method[0]}.${kind}`, frame]];
}

test("a replay's real frames, both ways, validate", { skip: (!schemaPath || !framesPath) && "set SIDECAR_SCHEMA and SIDECAR_FRAMES" }, () => {
  const { get } = load();
  const asked = new Map();
  const violations = [];
  let count = 0;
  for (const text of readFileSync(framesPath, "utf8").split("\n")) {
    if (!text) continue;
    const line = JSON.parse(text);
    const frame = JSON.parse(line.frame);
    if (line.dir === "to_sidecar" && frame.method === "auth") asked.clear(); // a new connection
    for (const [name, instance] of defsOf(line.dir, frame, asked)) {
      const validate = get(name);
      if (!validate) { violations.push(`${name}: no such def`); continue; }
      if (!validate(instance)) violations.push(`${name}: ${JSON.stringify(validate.errors.slice(0, 3))}`);
    }
    count++;
  }
  console.log(`ajv strict: ${count} frames, ${violations.length} violations`);
  assert.ok(count > 0);
  assert.deepEqual(violations.slice(0, 20), []);
});
