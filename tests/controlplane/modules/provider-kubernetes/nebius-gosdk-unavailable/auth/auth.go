// Package auth is a build-only stand-in: see the module's go.mod for why.
package auth

// BearerToken is the token shape provider-kubernetes reads.
type BearerToken struct {
	Token string
}

// PrivateKeyParser carries nothing: service-account keys are never parsed in this build.
type PrivateKeyParser struct{}

// NewPrivateKeyParser is accepted and ignored.
func NewPrivateKeyParser([]byte, string, string) PrivateKeyParser { return PrivateKeyParser{} }
