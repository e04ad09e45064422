package api

import (
	"context"
	"errors"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/models"
)

// V2Repository adapts a models.Repository to the V2 protocols'
// infer.Repository, for the REST routes here and the gRPC service
// cmd/llmserve registers; nil gives nil.
func V2Repository(repo *models.Repository) infer.Repository {
	if repo == nil {
		return nil
	}
	return v2Repository{repo}
}

type v2Repository struct{ repo *models.Repository }

func (r v2Repository) Index(readyOnly bool) []infer.IndexEntry {
	var out []infer.IndexEntry
	for _, e := range r.repo.Index(readyOnly) {
		out = append(out, infer.IndexEntry(e))
	}
	if out == nil {
		out = []infer.IndexEntry{}
	}
	return out
}

func (r v2Repository) Load(ctx context.Context, name string) error {
	return repoError(r.repo.Load(ctx, name))
}

func (r v2Repository) Unload(ctx context.Context, name string) error {
	return repoError(r.repo.Unload(ctx, name))
}

// repoError maps the repository's errors to infer's kinds.
func repoError(err error) error {
	var le *models.LoadError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, models.ErrNotInRepository):
		return infer.Errorf(infer.NotFound, "%v", err)
	case errors.Is(err, models.ErrBusy):
		return infer.Errorf(infer.Unavailable, "%v", err)
	case errors.As(err, &le):
		return infer.Errorf(infer.Invalid, "%v", err)
	}
	return infer.Errorf(infer.Internal, "%v", err)
}
