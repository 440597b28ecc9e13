// Walks stages one after the other, each with the same closed load (VUS
// buyers that each wait for their answer before the next attempt, like the
// load generator's max-rate workers), then audits each stage.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e STAGES=atomic,segmented k6/stage-walk.js
//
// Environment: BASE_URL, STAGES (comma-separated, default every stage but
// redlock), SKU, ADMIN_TOKEN, STOCK (default 1000000), SEGMENTS, VUS
// (default 32), DURATION per stage (default 5s), P99_MS (default 5000). The
// summary gives each stage's sales (sales{stage:...}); sales/s = sales /
// DURATION. USERS, EAGER, EAGER_REQUESTS name buyers (the order stages:
// lib.js).
import exec from 'k6/execution';
import { audit, clearFaults, purchase, reset, runID, zeroCounters } from './lib.js';

const STAGES = (__ENV.STAGES || 'naive,synchronized,setnx,setnx-expire,uuid-lua,watchdog,segmented,atomic')
  .split(',').map((s) => s.trim()).filter((s) => s);
const DURATION = __ENV.DURATION || '5s';
const PAUSE_S = 1; // between stages, so their requests do not overlap
// Stages that must never oversell, even under this load (the others show
// their defect; the teardown logs every audit).
const CORRECT = ['setnx', 'watchdog', 'segmented', 'atomic', 'redlock', 'fenced'];
// Order stages (run them with USERS set: lib.js) that keep each buyer to
// one order, and that sell nothing short.
const ONE_PER_USER = ['one-per-user-lua', 'one-per-user-lock'];
const NO_UNDERSELL = [...ONE_PER_USER, 'optimistic-mysql'];
const seconds = (d) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(d);
  if (!m) throw new Error(`DURATION ${d}: want e.g. 500ms, 5s or 1m`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60 }[m[2]];
};

const scenarios = {};
const thresholds = {
  http_req_failed: ['rate<0.01'],
  checks: ['rate>0.99'],
};
STAGES.forEach((stage, i) => {
  scenarios[stage] = {
    executor: 'constant-vus',
    exec: 'buy',
    vus: Number(__ENV.VUS || 32),
    duration: DURATION,
    startTime: `${i * (seconds(DURATION) + PAUSE_S)}s`,
    gracefulStop: '5s',
    env: { STAGE: stage },
    tags: { stage },
  };
  // A threshold per stage also puts each stage's figures in the summary.
  thresholds[`sales{stage:${stage}}`] = ['count>0'];
  thresholds[`http_req_duration{stage:${stage}}`] = [`p(99)<${Number(__ENV.P99_MS || 5000)}`];
  if (CORRECT.includes(stage)) thresholds[`oversold{stage:${stage}}`] = ['count==0'];
  if (ONE_PER_USER.includes(stage)) thresholds[`duplicate_orders{stage:${stage}}`] = ['count==0'];
  if (NO_UNDERSELL.includes(stage)) thresholds[`undersold{stage:${stage}}`] = ['count==0'];
});

export const options = { scenarios, thresholds };

export function setup() {
  for (const stage of STAGES) {
    reset(stage, Number(__ENV.STOCK || 1000000), Number(__ENV.SEGMENTS || 0));
    clearFaults(stage);
    zeroCounters(stage);
  }
  return { run: runID() };
}

export function buy(data) {
  purchase(__ENV.STAGE, `${data.run}-${__ENV.STAGE}-${exec.scenario.iterationInTest}`);
}

export function teardown() {
  for (const stage of STAGES) audit(stage);
}
