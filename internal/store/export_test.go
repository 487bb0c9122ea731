package store

// Hooks for the external tests (package store_test), which may import the
// engine packages that this package's own tests cannot.

// DeferStep is deferStep.
const DeferStep = deferStep

// WriterOpts returns w's options, defaults filled in.
func WriterOpts(w *Writer) WriterOptions { return w.opts }
