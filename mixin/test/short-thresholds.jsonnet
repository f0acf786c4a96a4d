// The alert rules with thresholds and durations a test can wait for (seconds, not
// minutes), for tests that run the rules in a real Prometheus against a real broker
// (tests/ops_e2e.rs):
//
//   jsonnet -S mixin/test/short-thresholds.jsonnet > rules.yml
//
// The other settings are the mixin's defaults.
local mixin = (import '../mixin.libsonnet') + {
  _config+:: {
    gapThreshold: 3,
    gapFor: '2s',
    stuckWarningSeconds: 3,
    blockedStuckSeconds: 2,
    readsUncommittedFor: '2s',
    mixedIsolationFor: '2s',
    hangingFor: '2s',
    // The recording rules' window, as the exporter's groups.rate_window in the test.
    rateWindow: '20s',
  },
};

(import '../lib/render.libsonnet').rulesYaml(mixin)
