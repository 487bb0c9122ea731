package route

import "strings"

// UpstreamModel returns the name the channel's provider knows model by:
// the name its exact entry in Models maps to, else the one of the first
// glob that matches it, else model itself (SPEC §5: the record keeps both,
// `model` and `upstream_model`). A * in a mapped name stands for what the
// glob's one * matched ("model-*" → "vendor.model-*").
func (c *Channel) UpstreamModel(model string) string {
	if len(c.Upstream) == 0 || model == "" {
		return model
	}
	if !strings.ContainsAny(model, "*?") {
		for _, p := range c.Models {
			if p == model {
				if up, ok := c.Upstream[p]; ok {
					return up
				}
				return model // an exact entry served under its own name
			}
		}
	}
	for _, p := range c.Models {
		if !strings.ContainsAny(p, "*?") || !Match(p, model) {
			continue
		}
		up, ok := c.Upstream[p]
		if !ok {
			return model
		}
		return substitute(p, up, model)
	}
	return model
}

// substitute puts into up, at its *, what the one * of pattern matched in
// model. The configuration allows a * in up only when pattern has exactly
// one * and no ?.
func substitute(pattern, up, model string) string {
	i := strings.IndexByte(up, '*')
	if i < 0 {
		return up
	}
	pre, post, ok := strings.Cut(pattern, "*")
	if !ok || len(pre)+len(post) > len(model) {
		return up
	}
	return up[:i] + model[len(pre):len(model)-len(post)] + up[i+1:]
}
