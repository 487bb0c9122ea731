package sim

import (
	"crypto/subtle"
	"net/http"
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
// request without api-version gets Azure's 404.
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
		s.serve(w, r, api, r.PathValue("deployment"), false, true)
	}
}
