// A flash sale's spike with bots, as scenarios/spike-bots.yaml does it with
// the load generator (docs/front-door.md): STOCK units (default 100), about
// 100× as many requests, nearly all after the sell-out. Honest buyers are
// many, each a fresh buyer who sends one request or, for TWICE of them, two
// back to back; BOTS bots (default 4) send BOT_RATE requests a second each
// (default 100, about 67× an honest buyer's 1–2 in a visit of a second).
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=... k6/spike-bots.js
//
// It runs against the front door the stack has: start the shops with
// --limiter/--limit-buyer/--soldout-mark-ttl (LOCKSTEP_* in compose), or
// nginx with limit_req (deploy/nginx/limit-nginx.conf), and compare runs.
// Environment: BASE_URL, STAGE (default atomic), SKU, ADMIN_TOKEN, STOCK,
// HONEST_RATE (honest visits a second, default 400), TWICE (default 0.5),
// BOTS, BOT_RATE, DURATION (default 10s), VUS, MAX_VUS.
import http from 'k6/http';
import exec from 'k6/execution';
import { Counter, Trend } from 'k6/metrics';
import { audit, reset, runID, SKU, BASE_URL } from './lib.js';

const STAGE = __ENV.STAGE || 'atomic';
const DURATION = __ENV.DURATION || '10s';
const BOTS = Number(__ENV.BOTS || 4);
const BOT_RATE = Number(__ENV.BOT_RATE || 100);
const TWICE = Number(__ENV.TWICE || 0.5);

// The report's columns, per kind of buyer (the load generator's spike record).
const honestUnits = new Counter('honest_units');
const botUnits = new Counter('bot_units');
const rateLimited = new Counter('rate_limited');
// A sold-out answered by a replica's sold-out mark, with no Redis round trip.
const markAnswers = new Counter('mark_answers');
const honestLatency = new Trend('honest_latency', true);

// A limiter's 429 is an answer of the contract too.
http.setResponseCallback(http.expectedStatuses(200, 409, 423, 429));

const pool = { timeUnit: '1s', duration: DURATION, preAllocatedVUs: Number(__ENV.VUS || 50), maxVUs: Number(__ENV.MAX_VUS || 300) };

export const options = {
  scenarios: {
    honest: { ...pool, executor: 'constant-arrival-rate', rate: Number(__ENV.HONEST_RATE || 400), exec: 'honest' },
    bots: { ...pool, executor: 'constant-arrival-rate', rate: BOTS * BOT_RATE, exec: 'bot' },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    oversold: ['count==0'],
    inconsistent: ['count==0'],
  },
};

export function setup() {
  reset(STAGE, Number(__ENV.STOCK || 100), 0);
  return { run: runID() };
}

function buy(user, bot) {
  const res = http.post(`${BASE_URL}/api/stages/${STAGE}/deduct?sku=${SKU}&qty=1&user=${encodeURIComponent(user)}`, null,
    { tags: { name: 'deduct', stage: STAGE, buyer: bot ? 'bot' : 'honest' } });
  if (res.status === 200) (bot ? botUnits : honestUnits).add(1);
  else if (res.status === 429) rateLimited.add(1);
  else if (res.status === 409 && res.body && res.body.includes('the sold-out mark')) markAnswers.add(1);
  if (!bot) honestLatency.add(res.timings.duration);
}

export function honest(data) {
  const user = `honest-${data.run}-${exec.scenario.iterationInTest}`;
  buy(user, false);
  if (Math.random() < TWICE) buy(user, false);
}

export function bot(data) {
  buy(`bot-${data.run}-${exec.scenario.iterationInTest % BOTS}`, true);
}

export function teardown() {
  audit(STAGE);
}
