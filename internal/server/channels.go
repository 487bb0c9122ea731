package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/route"
)

// Channels live (issue 48): GET /api/channels shows each channel's
// configuration (secrets redacted), its state, its in-flight requests and
// the latency its route ranks it by; POST /api/channels/{name}/{action}
// lets an admin drain, disable, enable or uneject one.

// ChannelView is one channel as GET /api/channels shows it.
type ChannelView struct {
	Name     string   `json:"name"`
	Protocol string   `json:"protocol"`
	BaseURL  string   `json:"base_url"` // userinfo redacted
	Key      string   `json:"key"`      // where the key comes from ("env T_KEY", "file /run/secrets/k"), never its value; "" without one
	Models   []string `json:"models"`
	// UpstreamModels maps the entries of Models a provider knows by
	// another name to that name (aliases); omitted when there are none.
	UpstreamModels map[string]string `json:"upstream_models,omitempty"`
	Groups         []string          `json:"groups"`
	Region         string            `json:"region,omitempty"`
	Priority       int               `json:"priority"`
	Weight         int               `json:"weight"`
	Timeouts       ChannelTimeouts   `json:"timeouts"`

	// State is disabled or drained (an operator's), else ejected (for some
	// model: see Ejections), else serving.
	State string `json:"state"`
	// Operator is the operator's state and who set it; nil when no
	// operator has acted on the channel.
	Operator *OperatorState `json:"operator,omitempty"`
	// Ejections are the models the channel is ejected for now.
	Ejections []ChannelEjection `json:"ejections"`
	Inflight  int64             `json:"inflight"`
	// Models' live state: per model seen, the route, its milestone's
	// recent p50/p95 (the latency the route ranks the channel by) and the
	// ejection state.
	Live []route.ChannelModel `json:"live"`
}

// ChannelTimeouts are a channel's timeouts as durations ("30s").
type ChannelTimeouts struct {
	Headers     string `json:"headers"`
	FirstOutput string `json:"first_output"`
	Idle        string `json:"idle"`
	Total       string `json:"total"`
}

// OperatorState is an operator's state of a channel.
type OperatorState struct {
	State string    `json:"state"` // serving | drained | disabled
	By    string    `json:"by"`    // the key name that set it
	At    time.Time `json:"at"`
	// Drained is set when the state holds the channel out of rotation and
	// its last in-flight request has ended.
	Drained bool `json:"drained"`
	// Replicas are the gateways sharing the store that applied this state,
	// and when; empty without a shared store.
	Replicas []ReplicaAck `json:"replicas"`
}

// ReplicaAck is one replica's application of an operator's state.
type ReplicaAck struct {
	Replica   string    `json:"replica"`
	AppliedAt time.Time `json:"applied_at"`
	Self      bool      `json:"self,omitempty"` // this gateway
}

// ChannelEjection is one model a channel is ejected for.
type ChannelEjection struct {
	Model  string     `json:"model"`
	State  string     `json:"state"` // ejected | probing
	Until  *time.Time `json:"until,omitempty"`
	Reason string     `json:"reason"`
}

// ChannelsResponse is GET /api/channels.
type ChannelsResponse struct {
	Replica  string        `json:"replica"` // this gateway's replica name
	Channels []ChannelView `json:"channels"`
}

// channelViews returns the configured channels a principal may see.
func (s *Server) channelViews(ctx context.Context, p auth.Principal) ChannelsResponse {
	cfgs := map[string]config.Channel{}
	for _, c := range s.cur.Load().Channels {
		cfgs[c.Name] = c
	}
	acks := s.replicaAcks(ctx)
	out := ChannelsResponse{Replica: s.replica, Channels: []ChannelView{}}
	live := s.router.Live()
	for i, c := range s.router.Channels() {
		if p.Role != auth.RoleAdmin && len(c.Groups) > 0 && !slices.Contains(c.Groups, p.Group) {
			continue
		}
		v := ChannelView{Name: c.Name, Protocol: c.Protocol, BaseURL: c.BaseURL.Redacted(), Models: nonNil(c.Models), UpstreamModels: c.Upstream, Groups: nonNil(c.Groups),
			Region: c.Region, Priority: c.Priority, Weight: c.Weight, Inflight: c.Inflight(), State: "serving", Ejections: []ChannelEjection{},
			Timeouts: ChannelTimeouts{Headers: c.Timeouts.Headers.String(), FirstOutput: c.Timeouts.FirstOutput.String(),
				Idle: c.Timeouts.Idle.String(), Total: c.Timeouts.Total.String()}}
		if cc, ok := cfgs[c.Name]; ok {
			switch {
			case cc.KeyFile != "":
				v.Key = "file " + cc.KeyFile
			case cc.KeyEnv != "":
				v.Key = "env " + cc.KeyEnv
			}
		} else if c.Key != "" {
			v.Key = "built in"
		}
		l := live[i]
		v.Live = l.Models
		for _, m := range l.Models {
			if m.State != "healthy" {
				v.Ejections = append(v.Ejections, ChannelEjection{Model: m.Model, State: m.State, Until: m.EjectedUntil, Reason: m.Reason})
			}
		}
		if len(v.Ejections) > 0 {
			v.State = "ejected"
		}
		if op := l.Op; op.By != "" {
			o := &OperatorState{State: op.State.String(), By: op.By, At: op.At.UTC(), Replicas: []ReplicaAck{}}
			if op.State != route.OpServing {
				v.State = op.State.String()
				o.Drained = v.Inflight == 0
			}
			o.Replicas = acks[c.Name]
			v.Operator = o
		}
		out.Channels = append(out.Channels, v)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Operator actions.
const (
	ActionDrain   = "drain"
	ActionDisable = "disable"
	ActionEnable  = "enable"
	ActionUneject = "uneject"
)

// ChannelAction is the answer of POST /api/channels/{name}/{action}.
type ChannelAction struct {
	Channel string `json:"channel"`
	Action  string `json:"action"`
	By      string `json:"by"`
	// Unejected names the models uneject readmitted the channel for.
	Unejected []string    `json:"unejected,omitempty"`
	View      ChannelView `json:"view"`
}

// registerChannels adds GET /api/channels and the operator actions.
func (s *Server) registerChannels(mux *http.ServeMux) {
	resolve := api.KeyringResolver(s.keys)
	mux.HandleFunc("GET /api/channels", func(w http.ResponseWriter, r *http.Request) {
		p, ok := resolve(r)
		switch {
		case !ok:
			api.WriteError(w, http.StatusUnauthorized, api.TypeAuthentication, "a valid admin or viewer key is required (Authorization: Bearer KEY)")
			return
		case p.Role == auth.RoleClient:
			api.WriteError(w, http.StatusForbidden, api.TypePermission, "channels are readable with an admin or viewer key")
			return
		}
		writeJSON(w, http.StatusOK, s.channelViews(r.Context(), p))
	})
	mux.HandleFunc("POST /api/channels/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := adminOnly(w, r, resolve, "changing a channel's state takes an admin key")
		if !ok {
			return
		}
		name, action := r.PathValue("name"), r.PathValue("action")
		if s.router.Channel(name) == nil {
			api.WriteError(w, http.StatusNotFound, api.TypeNotFound, "no channel named "+strconv.Quote(clip(name, 64))+" in the configuration in use")
			return
		}
		res, err := s.ChannelAct(r.Context(), name, action, p.Name)
		if err != nil {
			api.WriteError(w, http.StatusBadRequest, api.TypeInvalidRequest, err.Error())
			return
		}
		res.View = s.channelView(r.Context(), p, name)
		writeJSON(w, http.StatusOK, res)
	})
}

func (s *Server) channelView(ctx context.Context, p auth.Principal, name string) ChannelView {
	for _, v := range s.channelViews(ctx, p).Channels {
		if v.Name == name {
			return v
		}
	}
	return ChannelView{Name: name}
}

// ChannelAct applies an operator's action to the channel name on this
// gateway at once, logs it with the key name by, and (drain, disable,
// enable) hands it to the other replicas through the store.
func (s *Server) ChannelAct(ctx context.Context, name, action, by string) (ChannelAction, error) {
	res := ChannelAction{Channel: name, Action: action, By: by}
	var st route.OpState
	switch action {
	case ActionUneject:
		res.Unejected = s.router.Uneject(name)
		s.log.Info("channel uneject", "channel", name, "key_name", by, "models", res.Unejected)
		return res, nil
	case ActionDrain:
		st = route.OpDrained
	case ActionDisable:
		st = route.OpDisabled
	case ActionEnable:
		st = route.OpServing
	default:
		return res, errUnknownAction(action)
	}
	rec := route.OpRecord{State: st, By: by, At: time.Now()}
	rec = s.publishChannelState(ctx, name, rec)
	s.router.SetOp(name, rec)
	s.noteApplied(name, rec)
	s.log.Info("channel "+action, "channel", name, "key_name", by, "state", st.String())
	return res, nil
}

type errUnknownAction string

func (e errUnknownAction) Error() string {
	return "unknown action " + strconv.Quote(clip(string(e), 32)) + ": want drain, disable, enable or uneject"
}

// clip bounds a client-supplied string before it reaches a reply or a log.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
