package v2grpc

import (
	"context"
	"crypto/subtle"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// inferencePrefix starts the full method names of the inference service;
// health checking and reflection stay open, as the HTTP probes do.
const inferencePrefix = "/inference.GRPCInferenceService/"

// AuthInterceptors require "authorization: Bearer <key>" metadata with one
// of keys on every call of the inference service (the gRPC side of
// --api-key), and of the services named in services (full names, such as
// "llmserve.worker.v1.Worker"); a missing or wrong key is UNAUTHENTICATED.
// With no keys they let everything through.
func AuthInterceptors(keys []string, services ...string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	prefixes := []string{inferencePrefix}
	for _, s := range services {
		prefixes = append(prefixes, "/"+s+"/")
	}
	want := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			want = append(want, []byte("Bearer "+k))
		}
	}
	check := func(ctx context.Context, method string) error {
		if len(want) == 0 || !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(method, p) }) {
			return nil
		}
		var got []byte
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				got = []byte(v[0])
			}
		}
		ok := 0
		for _, k := range want {
			ok |= subtle.ConstantTimeCompare(got, k)
		}
		if ok != 1 {
			return status.Error(codes.Unauthenticated, "missing or invalid API key: send the metadata authorization: Bearer <key>")
		}
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
	return unary, stream
}
