// Shared by the lockstep k6 scripts: the shop's HTTP contract (SPEC.md) and
// the counters of each answer.
import http from 'k6/http';
import { check, fail } from 'k6';
import { Counter } from 'k6/metrics';

export const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
export const SKU = __ENV.SKU || 'sku-1';
const ADMIN_TOKEN = __ENV.ADMIN_TOKEN || '';

// Remote write names these k6_sales_total, k6_sold_out_total, ...
export const sales = new Counter('sales');
export const soldOut = new Counter('sold_out');
export const lockBusy = new Counter('lock_busy');
export const oversold = new Counter('oversold');
export const inconsistent = new Counter('inconsistent');

// zeroCounters records a 0 of every answer counter, so each has a series in
// Prometheus (and a 0 on the dashboard) even when that answer never comes.
export function zeroCounters(stage) {
  for (const c of [sales, soldOut, lockBusy]) c.add(0, { stage });
}

// Sold out (409) and lock busy (423) are answers of the contract, not
// failures: http_req_failed counts only the rest (5xx, 400, 404, ...).
http.setResponseCallback(http.expectedStatuses(200, 409, 423));

function adminParams() {
  const headers = { 'Content-Type': 'application/json' };
  if (ADMIN_TOKEN) headers.Authorization = `Bearer ${ADMIN_TOKEN}`;
  return { headers, tags: { name: 'admin' } };
}

// reset sets the stage's stock and drops its sales and locks.
export function reset(stage, stock, segments) {
  const body = { sku: SKU, stock };
  if (segments) body.segments = segments;
  const res = http.post(`${BASE_URL}/api/stages/${stage}/reset`, JSON.stringify(body), adminParams());
  if (res.status !== 200) fail(`reset ${stage}: ${res.status} ${res.body}`);
}

// clearFaults turns every fault knob of the stage off.
export function clearFaults(stage) {
  const res = http.put(`${BASE_URL}/api/stages/${stage}/faults`, JSON.stringify({}), adminParams());
  if (res.status !== 200) fail(`faults ${stage}: ${res.status} ${res.body}`);
}

// deduct is one sale attempt with its own Idempotency-Key, counted by answer.
export function deduct(stage, key) {
  const res = http.post(`${BASE_URL}/api/stages/${stage}/deduct?sku=${SKU}&qty=1`, null, {
    headers: { 'Idempotency-Key': key },
    tags: { name: 'deduct', stage },
  });
  const tags = { stage };
  if (res.status === 200) sales.add(1, tags);
  else if (res.status === 409) soldOut.add(1, tags);
  else if (res.status === 423) lockBusy.add(1, tags);
  check(res, { 'sale, sold out or lock busy': (r) => r.status === 200 || r.status === 409 || r.status === 423 }, tags);
  return res;
}

// audit reads the stage's audit and records an oversell or a lost update.
export function audit(stage) {
  const res = http.get(`${BASE_URL}/api/stages/${stage}/audit?sku=${SKU}`, { tags: { name: 'audit' } });
  if (res.status !== 200) fail(`audit ${stage}: ${res.status} ${res.body}`);
  const a = res.json();
  oversold.add(a.oversold, { stage });
  inconsistent.add(a.consistent ? 0 : 1, { stage });
  console.log(`${stage}: initial ${a.initial}, stock ${a.stock}, sold ${a.sold}, oversold ${a.oversold}, consistent ${a.consistent}`);
  return a;
}

// runID makes Idempotency-Keys unique across runs against the same Redis.
export function runID() {
  return `${Date.now().toString(36)}-${Math.floor(Math.random() * 1e9).toString(36)}`;
}
