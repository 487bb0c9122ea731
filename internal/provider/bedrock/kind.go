package bedrock

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/ttfx/ttfx/internal/wire"
)

// settings are the channel keys of the bedrock kind besides the common ones
// (region names the AWS region; key_env or key_file a Bedrock API key).
var settings = []wire.Setting{
	{Name: "profile", Doc: "the shared config profile whose credentials sign requests (AWS_PROFILE's role); without it and without a key, the default chain"},
}

// defaultBaseURL is the region's runtime endpoint.
func defaultBaseURL(region string, _ map[string]string) string {
	if !regionName(region) {
		return ""
	}
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

// regionName reports whether s looks like an AWS region ("us-east-1",
// "us-gov-west-1"): lowercase letters, digits and hyphens.
func regionName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// regionOf is the region of a runtime endpoint's host
// ("bedrock-runtime.eu-west-3.amazonaws.com", also the FIPS one), or "".
func regionOf(base *url.URL) string {
	if base == nil {
		return ""
	}
	h := base.Hostname()
	for _, p := range []string{"bedrock-runtime-fips.", "bedrock-runtime."} {
		if rest, ok := strings.CutPrefix(h, p); ok {
			if r, _, ok := strings.Cut(rest, "."); ok && regionName(r) {
				return r
			}
		}
	}
	return ""
}

// open builds a channel's credentials: a Bedrock API key (key_env or
// key_file) is a bearer token and needs nothing more; otherwise requests
// are signed with SigV4 by credentials from AWS's default chain
// (environment, shared config and credentials files and their profile,
// web identity, container and instance roles), which start to load here,
// off the request path.
func open(c wire.ChannelConfig) (*wire.Upstream, error) {
	if c.Key != "" {
		if c.Settings["profile"] != "" {
			return nil, fmt.Errorf("give a Bedrock API key (key_env, key_file) or a profile, not both")
		}
		return &wire.Upstream{Body: body}, nil // Kind.Authorize sends the key as a bearer token
	}
	region := c.Region
	if region == "" {
		region = regionOf(c.Base)
	}
	opts := []func(*config.LoadOptions) error{}
	if p := c.Settings["profile"]; p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if region != "" {
		if !regionName(region) {
			return nil, fmt.Errorf("region %q is not an AWS region", region)
		}
		opts = append(opts, config.WithRegion(region))
	}
	if c.Client != nil {
		opts = append(opts, config.WithHTTPClient(c.Client))
	}
	// Loading reads the environment and the shared files, no network:
	// the first credentials are fetched by NewSigV4, in the background.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no region: set the channel's region (or AWS_REGION, or a region in the profile)")
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("no AWS credentials in the default chain and no Bedrock API key (key_env)")
	}
	return &wire.Upstream{Body: body, Credentials: NewSigV4(cfg.Credentials, cfg.Region, c.Name, nil)}, nil
}
