// Buyers and payers on async-stream (issue 28): an open model of buyers
// (ramping-arrival-rate) buys one unit each; a share PAY_SHARE of those who
// got an order (the sale's 200 names it) pay it, POST
// /api/orders/{id}/pay?user=U, after a delay drawn within 1.5 × PAY_WITHIN
// of the sale, so a third of them come past their deadline and race the
// order workers' sweeper: paid (200) or refused (409 order_cancelled),
// never both. A payment sent before the workers wrote its order is
// answered 404 and retried every 100 ms for up to 5 s.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e PAY_WITHIN=1 k6/async-pay.js
//
// The order workers must open payments: run them with -pay-within (the
// workshop does for a scenario with a payment step, e.g.
// `go run ./cmd/workshop --keep --scenario payment-during-load`), and set
// PAY_WITHIN (seconds) to theirs. Environment: BASE_URL, SKU, ADMIN_TOKEN,
// STOCK (default 300), USERS (default 1000), PAY_SHARE (default 0.6),
// PAY_WITHIN (default 1), RATE (buyers/s, default 200), DURATION (default
// 3s), MAX_VUS. The teardown's audit, after waiting for the sweeper, must
// show the live units are the paid ones (a unit cancelled is back on sale).
import http from 'k6/http';
import { check, fail, sleep } from 'k6';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';
import { BASE_URL, audit, clearFaults, deduct, reset, runID, zeroCounters } from './lib.js';

const STAGE = 'async-stream';
const STOCK = Number(__ENV.STOCK || 300);
const USERS = Number(__ENV.USERS || 1000);
const PAY_SHARE = Number(__ENV.PAY_SHARE || 0.6);
const PAY_WITHIN = Number(__ENV.PAY_WITHIN || 1);
const LATE_FACTOR = 1.5;
const RETRY_404_S = 0.1;
const RETRY_404_FOR_S = 5;

export const paid = new Counter('paid');
export const paymentRefused = new Counter('payment_refused');
export const paymentFailed = new Counter('payment_failed');
export const latePayers = new Counter('late_payers');
export const retried404 = new Counter('payment_retried_404');
// From the teardown's audit: live units that are not paid orders' (an
// order both paid and cancelled, or unpaid past its deadline).
export const unsettled = new Counter('unsettled_units');

export const options = {
  scenarios: {
    buyers: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 200),
      timeUnit: '1s',
      duration: __ENV.DURATION || '3s',
      // A payer waits up to 1.5 × PAY_WITHIN in its iteration.
      preAllocatedVUs: 100,
      maxVUs: Number(__ENV.MAX_VUS || 1000),
      tags: { stage: STAGE },
    },
  },
  thresholds: {
    checks: ['rate>0.99'],
    sales: ['count>0'],
    paid: ['count>0'],
    payment_refused: ['count>0'],
    payment_failed: ['count==0'],
    oversold: ['count==0'],
    inconsistent: ['count==0'],
    undersold: ['count==0'],
    unsettled_units: ['count==0'],
  },
};

export function setup() {
  reset(STAGE, STOCK, 0);
  clearFaults(STAGE);
  zeroCounters(STAGE);
  for (const c of [paid, paymentRefused, paymentFailed, latePayers, retried404]) c.add(0);
  return { run: runID() };
}

export default function (data) {
  const user = `user-${Math.floor(Math.random() * USERS)}`;
  const res = deduct(STAGE, `${data.run}-${exec.scenario.iterationInTest}`, user);
  if (res.status !== 200 || Math.random() >= PAY_SHARE) return;
  const order = res.json('order');
  const delay = Math.random() * LATE_FACTOR * PAY_WITHIN;
  if (delay > PAY_WITHIN) latePayers.add(1);
  sleep(delay);
  pay(order, user);
}

// pay pays order, retrying a 404 while the workers have not written it.
function pay(order, user) {
  const url = `${BASE_URL}/api/orders/${order}/pay?user=${encodeURIComponent(user)}`;
  const params = { tags: { name: 'pay' }, responseCallback: http.expectedStatuses(200, 404, 409) };
  let res;
  for (let waited = 0; ; waited += RETRY_404_S) {
    res = http.post(url, null, params);
    if (res.status !== 404 || waited >= RETRY_404_FOR_S) break;
    retried404.add(1);
    sleep(RETRY_404_S);
  }
  const cancelled = res.status === 409 && res.body.includes('"order_cancelled"');
  if (res.status === 200) paid.add(1);
  else if (cancelled) paymentRefused.add(1);
  else paymentFailed.add(1);
  check(res, { 'paid or cancelled': () => res.status === 200 || cancelled });
}

export function teardown() {
  // Every deadline passes within PAY_WITHIN of the last sale; the sweeper
  // then cancels and gives back.
  sleep(PAY_WITHIN + 2);
  const a = audit(STAGE);
  if (!a.payments || !a.orders) fail(`${STAGE}: the audit shows no payments: run the workers with -pay-within`);
  const p = a.payments;
  console.log(`${STAGE}: payments ${p.paid} paid, ${p.cancelled} cancelled, ${p.unpaid} unpaid, ${p.unreturned} unreturned; ${a.orders.units} units live`);
  unsettled.add(Math.abs(a.orders.units - p.paid) + p.unpaid + p.unreturned);
}
