package telemetry

// TraceB exposes the trace-B record of metrics_test.go to the external
// tests (otlp_test.go), so both build it one way.
var TraceB = traceB
