-- How long a request queued for the gateway's own limits (admission,
-- docs/admission.md): a local phase after t0, NULL when it did not queue.
ALTER TABLE requests ADD COLUMN admission_wait_ms DOUBLE PRECISION;
