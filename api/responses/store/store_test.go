package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustOpen(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPutGetDelete(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s := mustOpen(t, Config{Dir: dir})
		if err := s.Put("resp_a", []byte("A")); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get("resp_a")
		if err != nil || string(got) != "A" {
			t.Fatalf("dir %q: Get = %q, %v", dir, got, err)
		}
		if err := s.Put("resp_a", []byte("A2")); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get("resp_a"); string(got) != "A2" || s.Len() != 1 {
			t.Fatalf("replace: %q, len %d", got, s.Len())
		}
		if err := s.Delete("resp_a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get("resp_a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := s.Delete("resp_a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if err := s.Put("", nil); err == nil {
			t.Fatal("empty id accepted")
		}
	}
	if _, err := Open(Config{Size: -1}); err == nil {
		t.Fatal("negative size accepted")
	}
}

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	s := mustOpen(t, Config{Size: 2})
	_ = s.Put("a", []byte("a"))
	_ = s.Put("b", []byte("b"))
	if _, err := s.Get("a"); err != nil { // a is now more recent than b
		t.Fatal(err)
	}
	_ = s.Put("c", []byte("c"))
	if _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b should be evicted: %v", err)
	}
	for _, id := range []string{"a", "c"} {
		if _, err := s.Get(id); err != nil {
			t.Fatalf("%s evicted: %v", id, err)
		}
	}
}

// TestBoundUnder10000 stores 10,000 responses (and more) into a store of
// the default bound, on disk, and of a smaller one in memory: it never
// holds more than its bound, in memory or in its file, and keeps the
// newest.
func TestBoundUnder10000(t *testing.T) {
	for _, size := range []int{0, 1000} {
		dir := ""
		if size == 0 {
			dir = t.TempDir()
		}
		// Without fsync: 10,000 synced writes take a minute on a slow disk,
		// and the bound does not depend on them.
		s := mustOpen(t, Config{Size: size, Dir: dir, NoSync: true})
		bound := s.Size()
		const n = 10500
		for i := range n {
			if err := s.Put(fmt.Sprintf("resp_%05d", i), []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				t.Fatal(err)
			}
			if s.Len() > bound {
				t.Fatalf("size %d: %d records after %d puts", size, s.Len(), i+1)
			}
		}
		if s.Len() != bound {
			t.Fatalf("size %d: Len = %d, want %d", size, s.Len(), bound)
		}
		if _, err := s.Get(fmt.Sprintf("resp_%05d", n-bound-1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("size %d: oldest kept: %v", size, err)
		}
		if _, err := s.Get(fmt.Sprintf("resp_%05d", n-bound)); err != nil {
			t.Fatalf("size %d: newest %d evicted: %v", size, bound, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if dir == "" {
			continue
		}
		// The file holds the same bound.
		r := mustOpen(t, Config{Size: size, Dir: dir})
		if r.Len() != bound {
			t.Fatalf("size %d: reopened with %d records, want %d", size, r.Len(), bound)
		}
		_ = r.Close()
	}
}

func TestPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Config{Size: 3, Dir: dir})
	for _, id := range []string{"a", "b", "c", "d"} { // a is evicted
		if err := s.Put(id, []byte("rec-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	r := mustOpen(t, Config{Size: 3, Dir: dir})
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
	for _, id := range []string{"b", "d"} {
		got, err := r.Get(id)
		if err != nil || string(got) != "rec-"+id {
			t.Fatalf("%s: %q, %v", id, got, err)
		}
	}
	for _, id := range []string{"a", "c"} {
		if _, err := r.Get(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// The order survived: b is older than d, so a smaller store keeps d.
	_ = r.Close()
	small := mustOpen(t, Config{Size: 1, Dir: dir})
	if _, err := small.Get("d"); err != nil || small.Len() != 1 {
		t.Fatalf("size 1 reopen: len %d, d: %v", small.Len(), err)
	}
	// And the order continues: a new put is newer than what was loaded.
	_ = small.Put("e", []byte("e"))
	if _, err := small.Get("d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("d should have been evicted by e: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	s := mustOpen(t, Config{Size: 50, Dir: t.TempDir()})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				id := fmt.Sprintf("r%d-%d", g, i)
				_ = s.Put(id, []byte(id))
				_, _ = s.Get(id)
				if i%3 == 0 {
					_ = s.Delete(id)
				}
			}
		}()
	}
	wg.Wait()
	if s.Len() > 50 {
		t.Fatalf("Len = %d", s.Len())
	}
}
