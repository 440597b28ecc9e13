// A flash-sale spike on one stage: an open model (ramping-arrival-rate), so
// buyers keep arriving however slow the shop gets, as in a real sale.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e STAGE=atomic k6/spike.js
//
// Environment: BASE_URL (nginx), STAGE (default atomic), SKU, ADMIN_TOKEN
// (for the reset), STOCK (default 1000000: never sold out), SEGMENTS,
// START_RATE, PEAK_RATE (sale attempts/s), RAMP, HOLD, VUS, MAX_VUS,
// P99_MS (latency threshold), MAX_DROPPED (dropped-buyers threshold),
// USERS, EAGER, EAGER_REQUESTS (buyers, for the order stages: lib.js). With
// K6_PROMETHEUS_RW_SERVER_URL set, run it
// with -o experimental-prometheus-rw to send the results to Prometheus.
import exec from 'k6/execution';
import { audit, clearFaults, purchase, reset, runID, zeroCounters } from './lib.js';

const STAGE = __ENV.STAGE || 'atomic';
const RAMP = __ENV.RAMP || '2s';
const HOLD = __ENV.HOLD || '5s';
const PEAK = Number(__ENV.PEAK_RATE || 2000);

export const options = {
  scenarios: {
    spike: {
      executor: 'ramping-arrival-rate',
      startRate: Number(__ENV.START_RATE || 50),
      timeUnit: '1s',
      preAllocatedVUs: Number(__ENV.VUS || 50),
      maxVUs: Number(__ENV.MAX_VUS || 200),
      stages: [
        { target: PEAK, duration: RAMP }, // the sale opens
        { target: PEAK, duration: HOLD }, // everyone buys
        { target: 0, duration: RAMP },    // and leaves
      ],
      tags: { stage: STAGE },
    },
  },
  thresholds: {
    // Anything but a sale, sold out or lock busy is a failure.
    http_req_failed: ['rate<0.01'],
    checks: ['rate>0.99'],
    [`http_req_duration{name:deduct}`]: [`p(99)<${Number(__ENV.P99_MS || 500)}`],
    // Buyers the shop could not take on time (every VU busy): 5% of a
    // second at the peak, unless MAX_DROPPED says otherwise.
    dropped_iterations: [`count<${Number(__ENV.MAX_DROPPED || Math.ceil(PEAK * 0.05))}`],
    sales: ['count>0'],
    // From the audit in teardown: the stage sold no unit twice.
    oversold: ['count==0'],
    inconsistent: ['count==0'],
  },
};

export function setup() {
  reset(STAGE, Number(__ENV.STOCK || 1000000), Number(__ENV.SEGMENTS || 0));
  clearFaults(STAGE);
  zeroCounters(STAGE);
  return { run: runID() };
}

export default function (data) {
  purchase(STAGE, `${data.run}-${exec.scenario.iterationInTest}`);
}

export function teardown() {
  audit(STAGE);
}
