package protocol

// ErrorResponse is an error response, which each client-facing API renders
// in its provider's own format (wire.API.ErrorBody): what the gateway
// answers for bad input or a failed upstream, and what the simulator sends
// as a provider would.
type ErrorResponse struct {
	Status  int    // HTTP status
	Message string // what the client reads
	Type    string // the error's type, for a format that names one; empty: derived from Status
	Param   string // the member at fault, for a format that names one; empty: none
	Code    string // the error's code, for a format that has one; empty: derived from Status
}
