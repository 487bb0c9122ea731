// Package azuresim is the simulator's side of the azure provider kind: an
// Azure OpenAI resource's two URL forms, its api-key header, its
// api-version query and its error bodies, and Entra ID's token endpoint.
//
//   - deployment form: POST /openai/deployments/{deployment}/chat/completions
//     (and /completions, /embeddings) and POST /openai/responses, each with
//     ?api-version=…; the deployment names the served model;
//   - v1 form: POST /openai/v1/chat/completions, /completions, /responses,
//     /embeddings, with the model in the body and no api-version;
//   - Entra ID: POST /{tenant}/oauth2/v2.0/token, the client-credentials
//     grant with client_id, client_secret and a scope ending in /.default,
//     for the applications sim.Identity.EntraClients holds.
//
// A request without an api-key header, or with a wrong one when
// sim.Options.APIKey is set, is refused 401 as Azure refuses it, unless it
// carries an Entra ID bearer token the simulator issued and that has not
// expired (any bearer token when no sim.Options.Identity is set); a
// deployment request without api-version gets Azure's 404. What Azure adds
// to OpenAI's wire format is added here too (writer): the content filter's
// chunks in chat streams and its own error bodies. The deployment form's
// answers carry Azure's rate-limit headers (the remaining counts only).
package azuresim

import (
	"bytes"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/provider/azure"
	"github.com/ttfx/ttfx/internal/provider/openai/openaisim"
	"github.com/ttfx/ttfx/internal/sim"
)

func init() {
	var routes []sim.Route
	for _, p := range []struct {
		path string
		api  sim.API
	}{
		{"/chat/completions", openaisim.Chat}, {"/completions", openaisim.Completions}, {"/embeddings", openaisim.Embeddings},
	} {
		routes = append(routes,
			sim.Route{Path: "/openai/deployments/{deployment}" + p.path, API: p.api, Model: "deployment", Accept: accept(true), Wrap: wrap, RateHeaders: rateHeaders},
			sim.Route{Path: "/openai/v1" + p.path, API: p.api, Accept: accept(false), Wrap: wrap})
	}
	routes = append(routes,
		sim.Route{Path: "/openai/responses", API: openaisim.Responses, Accept: accept(true), Wrap: wrap},
		sim.Route{Path: "/openai/v1/responses", API: openaisim.Responses, Accept: accept(false), Wrap: wrap})
	sim.RegisterKind(&sim.Kind{Name: azure.Kind, Routes: routes,
		Endpoints: []sim.Endpoint{{Path: "/{tenant}/oauth2/v2.0/token", Serve: entraToken}}})
}

// accept authenticates a request as Azure does; a versioned
// (deployment-form) route also needs api-version.
func accept(versioned bool) func(c *sim.Call) *sim.Error {
	return func(c *sim.Call) *sim.Error {
		r := c.R
		key := r.Header.Get("Api-Key")
		want := c.Options().APIKey
		switch {
		case key == "" && r.Header.Get("Authorization") != "":
			// An Entra ID token instead of the key.
			if why := c.Bearer(); why != "" {
				return sim.CodedError(http.StatusUnauthorized, "401",
					"Access denied due to invalid or expired Entra ID token ("+why+"). Make sure to provide a valid token for an identity with access to this resource.")
			}
		case key == "" && r.Header.Get("Authorization") == "":
			return sim.CodedError(http.StatusUnauthorized, "401",
				"Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API.")
		case want != "" && subtle.ConstantTimeCompare([]byte(key), []byte(want)) != 1:
			return sim.CodedError(http.StatusUnauthorized, "401",
				"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		}
		if versioned && r.URL.Query().Get("api-version") == "" {
			return sim.CodedError(http.StatusNotFound, "404", "Resource not found")
		}
		return nil
	}
}

func wrap(w http.ResponseWriter, api sim.API) http.ResponseWriter {
	return &writer{ResponseWriter: w, chat: api == openaisim.Chat}
}

// rateHeaders are Azure OpenAI's rate-limit headers: the remaining counts
// only.
func rateHeaders(h http.Header, rs sim.RateState) {
	for _, l := range rs.Limits {
		h.Set("X-Ratelimit-Remaining-"+l.Name, strconv.FormatInt(l.Remaining, 10))
	}
	sim.RetryAfterMs(h, rs)
}

// Azure's content filter annotates a chat stream with chunks of its own,
// all metadata by SPEC §2: before the first choice, a chunk with empty
// choices and the prompt's filter results; with the asynchronous filter,
// after the answer and before [DONE], a chunk whose only choice has an
// empty delta, the completion's filter results and the offsets they
// cover. Both are as Azure OpenAI sends them (api-version 2024-10-21).
const (
	promptFilter = `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}` + "\n\n"
	asyncFilter  = `data: {"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":1},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"protected_material_code":{"filtered":false,"detected":false},"protected_material_text":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}},"delta":{},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":""}` + "\n\n"
	done         = "data: [DONE]\n\n"
)

// Azure's error bodies for the simulator's status faults: a 429 as Azure's
// rate limiter words it, and a 400 as its content filter refuses a prompt
// (code content_filter, the policy named in innererror).
const (
	rateLimited = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
	filtered    = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}`
)

// writer turns what the OpenAI side of the simulator writes into what
// an Azure resource sends: the filter chunks around a chat stream, and
// Azure's bodies for status faults. The simulator writes each event (and
// an error body) in one Write, so the chunks go out with the events they
// travel with, at their times.
type writer struct {
	http.ResponseWriter
	chat    bool // a chat/completions stream gets the filter chunks
	started bool // the first body bytes were written
	status  int
}

func (w *writer) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Write(p []byte) (int, error) {
	first := !w.started
	w.started = true
	switch {
	case w.status >= 400 && first && bytes.Contains(p, []byte("(fault status:")):
		body := rateLimited
		switch w.status {
		case http.StatusTooManyRequests:
		case http.StatusBadRequest:
			body = filtered
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
		out = append([]byte(promptFilter), out...)
	}
	if bytes.HasSuffix(out, []byte(done)) {
		at := len(out) - len(done)
		out = append(append(append([]byte(nil), out[:at]...), asyncFilter...), done...)
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController flush the events and abort a cut
// stream through the writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// entraToken serves POST /{tenant}/oauth2/v2.0/token: the
// client-credentials grant.
func entraToken(s *sim.Server, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		sim.OAuthError(w, http.StatusMethodNotAllowed, "invalid_request", "AADSTS900561: The endpoint only accepts POST requests.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		sim.OAuthError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must be a form.")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") != "client_credentials" {
		sim.OAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
		return
	}
	if !strings.HasSuffix(f.Get("scope"), "/.default") {
		sim.OAuthError(w, http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	id := f.Get("client_id")
	var want string
	var known bool
	if ident := s.Identity(); ident != nil {
		want, known = ident.EntraClients[id]
	}
	if !known {
		sim.OAuthError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+sim.Clip(id)+"' was not found in the directory.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(f.Get("client_secret")), []byte(want)) != 1 {
		sim.OAuthError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
		return
	}
	s.IssueToken(w, "client_credentials", id)
}
