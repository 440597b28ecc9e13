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
// The order stages' figures, from the audit: orders beyond each buyer's
// first, and units gone from the stock that no order holds (少卖).
export const duplicateOrders = new Counter('duplicate_orders');
export const undersold = new Counter('undersold');
export const alreadyBought = new Counter('already_bought');
export const inconsistent = new Counter('inconsistent');

// zeroCounters records a 0 of every answer counter, so each has a series in
// Prometheus (and a 0 on the dashboard) even when that answer never comes.
export function zeroCounters(stage) {
  for (const c of [sales, soldOut, lockBusy, alreadyBought]) c.add(0, { stage });
}

// Sold out (409) and lock busy (423) are answers of the contract, not
// failures: http_req_failed counts only the rest (5xx, 400, 404, ...).
// (409 already_bought, a one-per-user refusal, is one of them too.)
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

// Buyers (the order stages): USERS buyers user-0 … user-(USERS-1); a share
// EAGER of the draws are scalpers who send EAGER_REQUESTS requests at
// once. USERS unset: sales name no buyer.
const USERS = Number(__ENV.USERS || 0);
const EAGER = Number(__ENV.EAGER || 0);
const EAGER_REQUESTS = Number(__ENV.EAGER_REQUESTS || 4);

function deductRequest(stage, key, user) {
  const buyer = user === undefined ? '' : `&user=${encodeURIComponent(user)}`;
  return ['POST', `${BASE_URL}/api/stages/${stage}/deduct?sku=${SKU}&qty=1${buyer}`, null, {
    headers: { 'Idempotency-Key': key },
    tags: { name: 'deduct', stage },
  }];
}

function count(stage, res) {
  const tags = { stage };
  if (res.status === 200) sales.add(1, tags);
  else if (res.status === 409 && res.body && res.body.includes('"already_bought"')) alreadyBought.add(1, tags);
  else if (res.status === 409) soldOut.add(1, tags);
  else if (res.status === 423) lockBusy.add(1, tags);
  check(res, { 'sale, sold out or lock busy': (r) => r.status === 200 || r.status === 409 || r.status === 423 }, tags);
  return res;
}

// deduct is one sale attempt with its own Idempotency-Key, counted by
// answer; user, optional, names the buyer.
export function deduct(stage, key, user) {
  const [method, url, body, params] = deductRequest(stage, key, user);
  return count(stage, http.request(method, url, body, params));
}

// purchase is one buyer's turn: with USERS set, a buyer drawn from the
// population sends one sale attempt, or, eager, EAGER_REQUESTS at once
// (each its own Idempotency-Key: separate clicks, not retries); without
// USERS it is deduct.
export function purchase(stage, key) {
  if (USERS === 0) return [deduct(stage, key)];
  const user = `user-${Math.floor(Math.random() * USERS)}`;
  const n = Math.random() < EAGER ? EAGER_REQUESTS : 1;
  const reqs = [];
  for (let i = 0; i < n; i++) reqs.push(deductRequest(stage, `${key}-${i}`, user));
  return http.batch(reqs).map((res) => count(stage, res));
}

// audit reads the stage's audit and records an oversell or a lost update.
export function audit(stage) {
  const res = http.get(`${BASE_URL}/api/stages/${stage}/audit?sku=${SKU}`, { tags: { name: 'audit' } });
  if (res.status !== 200) fail(`audit ${stage}: ${res.status} ${res.body}`);
  const a = res.json();
  oversold.add(a.oversold, { stage });
  inconsistent.add(a.consistent ? 0 : 1, { stage });
  console.log(`${stage}: initial ${a.initial}, stock ${a.stock}, sold ${a.sold}, oversold ${a.oversold}, consistent ${a.consistent}`);
  if (a.orders) {
    duplicateOrders.add(a.orders.duplicate_orders, { stage });
    undersold.add(a.orders.undersold, { stage });
    console.log(`${stage}: ${a.orders.orders} orders of ${a.orders.buyers} buyers, ${a.orders.duplicate_orders} duplicate orders, ${a.orders.conflicts} conflicts, undersold ${a.orders.undersold}`);
  }
  return a;
}

// runID makes Idempotency-Keys unique across runs against the same Redis.
export function runID() {
  return `${Date.now().toString(36)}-${Math.floor(Math.random() * 1e9).toString(36)}`;
}
