package sim

import (
	"bytes"
	"crypto/subtle"
	"net/http"
	"strings"
)

// The simulator's side of the azure provider kind: an Azure OpenAI
// resource's two URL forms, its api-key header, its api-version query and
// its error bodies.
//
//   - deployment form: POST /openai/deployments/{deployment}/chat/completions
//     (and /completions, /embeddings) and POST /openai/responses, each with
//     ?api-version=…; the deployment names the served model;
//   - v1 form: POST /openai/v1/chat/completions, /completions, /responses,
//     /embeddings, with the model in the body and no api-version.
//
// A request without an api-key header, or with a wrong one when
// Options.APIKey is set, is refused 401 as Azure refuses it, unless it
// carries an Entra ID bearer token the simulator issued and that has not
// expired (any bearer token when no Options.Identity is set); a deployment
// request without api-version gets Azure's 404. What Azure adds to
// OpenAI's wire format is added here too (azureWriter): the content
// filter's chunks in chat streams and its own error bodies.
func (s *Server) azureRoutes(m *http.ServeMux) {
	for path, api := range map[string]API{
		"/chat/completions": APIChat, "/completions": APICompletions, "/embeddings": APIEmbeddings,
	} {
		m.HandleFunc("/openai/deployments/{deployment}"+path, s.azure(api, true))
		m.HandleFunc("/openai/v1"+path, s.azure(api, false))
	}
	m.HandleFunc("/openai/responses", s.azure(APIResponses, true))
	m.HandleFunc("/openai/v1/responses", s.azure(APIResponses, false))
}

// azure serves one route of the azure kind; a versioned (deployment-form)
// route needs api-version.
func (s *Server) azure(api API, versioned bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Api-Key")
		switch {
		case key == "" && r.Header.Get("Authorization") != "":
			// An Entra ID token (identity.go) instead of the key.
			if why := s.bearer(r); why != "" {
				writeError(w, familyOpenAI, &apiError{status: http.StatusUnauthorized, code: "401",
					msg: "Access denied due to invalid or expired Entra ID token (" + why + "). Make sure to provide a valid token for an identity with access to this resource."})
				return
			}
		case key == "" && r.Header.Get("Authorization") == "":
			writeError(w, familyOpenAI, &apiError{status: http.StatusUnauthorized, code: "401",
				msg: "Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API."})
			return
		case s.opts.APIKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.APIKey)) != 1:
			writeError(w, familyOpenAI, &apiError{status: http.StatusUnauthorized, code: "401",
				msg: "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."})
			return
		}
		if versioned && r.URL.Query().Get("api-version") == "" {
			writeError(w, familyOpenAI, &apiError{status: http.StatusNotFound, code: "404", msg: "Resource not found"})
			return
		}
		aw := &azureWriter{ResponseWriter: w, chat: api == APIChat}
		s.serve(aw, r, api, r.PathValue("deployment"), false, true)
	}
}

// Azure's content filter annotates a chat stream with chunks of its own,
// all metadata by SPEC §2: before the first choice, a chunk with empty
// choices and the prompt's filter results; with the asynchronous filter,
// after the answer and before [DONE], a chunk whose only choice has an
// empty delta, the completion's filter results and the offsets they
// cover. Both are as Azure OpenAI sends them (api-version 2024-10-21).
const (
	azurePromptFilter = `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}` + "\n\n"
	azureAsyncFilter  = `data: {"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":1},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"protected_material_code":{"filtered":false,"detected":false},"protected_material_text":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}},"delta":{},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":""}` + "\n\n"
	azureDone         = "data: [DONE]\n\n"
)

// Azure's error bodies for the simulator's status faults: a 429 as Azure's
// rate limiter words it, and a 400 as its content filter refuses a prompt
// (code content_filter, the policy named in innererror).
const (
	azureRateLimited = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
	azureFiltered    = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}`
)

// azureWriter turns what the OpenAI side of the simulator writes into what
// an Azure resource sends: the filter chunks around a chat stream, and
// Azure's bodies for status faults. The simulator writes each event (and
// an error body) in one Write, so the chunks go out with the events they
// travel with, at their times.
type azureWriter struct {
	http.ResponseWriter
	chat    bool // a chat/completions stream gets the filter chunks
	started bool // the first body bytes were written
	status  int
}

func (w *azureWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *azureWriter) Write(p []byte) (int, error) {
	first := !w.started
	w.started = true
	switch {
	case w.status >= 400 && first && bytes.Contains(p, []byte("(fault status:")):
		body := azureRateLimited
		switch w.status {
		case http.StatusTooManyRequests:
		case http.StatusBadRequest:
			body = azureFiltered
		default:
			return w.ResponseWriter.Write(p)
		}
		if _, err := w.ResponseWriter.Write([]byte(body)); err != nil {
			return 0, err
		}
		return len(p), nil
	case !w.chat || w.status >= 400 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
		return w.ResponseWriter.Write(p)
	}
	out := p
	if first {
		out = append([]byte(azurePromptFilter), out...)
	}
	if bytes.HasSuffix(out, []byte(azureDone)) {
		at := len(out) - len(azureDone)
		out = append(append(append([]byte(nil), out[:at]...), azureAsyncFilter...), azureDone...)
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController flush the events and abort a cut
// stream through the writer.
func (w *azureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
