// Package gosdk is a build-only stand-in: see go.mod for why.
package gosdk

import (
	"context"
	"errors"

	"github.com/nebius/gosdk/auth"
)

// ErrUnavailable is what every Nebius credential path returns in this build.
var ErrUnavailable = errors.New("nebius credentials are not supported by this test build of provider-kubernetes")

// SDK never exists in this build; the type is here so callers compile.
type SDK struct{}

// Option configures New.
type Option func()

// CredentialsReader is the argument WithCredentials takes.
type CredentialsReader struct{}

// New always fails: no Nebius endpoint is reachable from the tests.
func New(context.Context, ...Option) (*SDK, error) { return nil, ErrUnavailable }

// WithCredentials is accepted and ignored.
func WithCredentials(CredentialsReader) Option { return func() {} }

// ServiceAccountReader is accepted and ignored.
func ServiceAccountReader(auth.PrivateKeyParser) CredentialsReader { return CredentialsReader{} }

// BearerToken always fails.
func (*SDK) BearerToken(context.Context) (auth.BearerToken, error) {
	return auth.BearerToken{}, ErrUnavailable
}
