package store

import (
	"cmp"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultSize is the number of records a Store keeps when Config.Size is 0.
const DefaultSize = 10000

// FileName is the bbolt file Open keeps in Config.Dir.
const FileName = "responses.db"

// ErrNotFound is returned by Get and Delete for an id the store does not
// hold (never stored, deleted, or evicted).
var ErrNotFound = errors.New("responsestore: not found")

// bucket holds id -> seq (8 bytes, big endian) + record.
var bucket = []byte("responses")

// Config configures a Store.
type Config struct {
	// Size is the most records kept; 0 means DefaultSize. Negative is an
	// error.
	Size int
	// Dir, when not empty, is the directory of the bbolt file that keeps
	// the records across restarts; it is created if missing.
	Dir string
	// NoSync skips the fsync after each write: faster, but a machine
	// crash may lose recent records or corrupt the file. For tests and
	// throwaway stores only.
	NoSync bool
}

// Store is a bounded LRU map from response id to record, optionally
// persisted.
type Store struct {
	size int
	db   *bolt.DB // nil: memory only

	mu    sync.Mutex
	seq   uint64                   // guarded by mu; last sequence number given
	items map[string]*list.Element // guarded by mu; values are *entry
	lru   *list.List               // guarded by mu; front is the most recent
}

type entry struct {
	id     string
	record []byte
}

// Open returns a store as cfg says, loading the records a previous run left
// in cfg.Dir (the newest Size of them; older ones are deleted).
func Open(cfg Config) (*Store, error) {
	if cfg.Size < 0 {
		return nil, fmt.Errorf("responsestore: size %d: must not be negative", cfg.Size)
	}
	s := &Store{size: cfg.Size, items: map[string]*list.Element{}, lru: list.New()}
	if s.size == 0 {
		s.size = DefaultSize
	}
	if cfg.Dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("responsestore: %w", err)
	}
	db, err := bolt.Open(filepath.Join(cfg.Dir, FileName), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: cfg.NoSync})
	if err != nil {
		return nil, fmt.Errorf("responsestore: open %s: %w", cfg.Dir, err)
	}
	s.db = db
	if err := s.load(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
}

// load reads every record, restores the LRU order by sequence number and
// evicts beyond the bound.
func (s *Store) load() error {
	type rec struct {
		seq uint64
		e   *entry
	}
	var recs []rec
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) < 8 {
				return fmt.Errorf("responsestore: record %q is corrupt (%d bytes)", k, len(v))
			}
			recs = append(recs, rec{seq: binary.BigEndian.Uint64(v), e: &entry{id: string(k), record: append([]byte(nil), v[8:]...)}})
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("responsestore: load: %w", err)
	}
	// Oldest first, so that each PushFront leaves the newest in front.
	sortBySeq(recs, func(r rec) uint64 { return r.seq })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.items[r.e.id] = s.lru.PushFront(r.e)
		s.seq = max(s.seq, r.seq)
	}
	return s.evictLocked()
}

func sortBySeq[T any](xs []T, key func(T) uint64) {
	slices.SortFunc(xs, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
}

// Put stores record under id (replacing any record there) as the most
// recently used, evicting the least recently used beyond the bound.
func (s *Store) Put(id string, record []byte) error {
	if id == "" {
		return errors.New("responsestore: empty id")
	}
	record = append([]byte(nil), record...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if s.db != nil {
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(record)), s.seq)
		v = append(v, record...)
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(id), v) }); err != nil {
			return fmt.Errorf("responsestore: put %q: %w", id, err)
		}
	}
	if el, ok := s.items[id]; ok {
		el.Value.(*entry).record = record
		s.lru.MoveToFront(el)
	} else {
		s.items[id] = s.lru.PushFront(&entry{id: id, record: record})
	}
	return s.evictLocked()
}

// evictLocked drops the least recently used records beyond the bound.
func (s *Store) evictLocked() error {
	var ids [][]byte
	for s.lru.Len() > s.size {
		el := s.lru.Back()
		e := el.Value.(*entry)
		s.lru.Remove(el)
		delete(s.items, e.id)
		ids = append(ids, []byte(e.id))
	}
	if s.db == nil || len(ids) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, id := range ids {
			if err := b.Delete(id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("responsestore: evict: %w", err)
	}
	return nil
}

// Get returns the record of id (ErrNotFound when there is none) and makes
// it the most recently used. The caller may keep but must not change the
// returned bytes.
func (s *Store) Get(id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[id]
	if !ok {
		return nil, ErrNotFound
	}
	s.lru.MoveToFront(el)
	return el.Value.(*entry).record, nil
}

// Delete removes the record of id; ErrNotFound when there is none.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[id]
	if !ok {
		return ErrNotFound
	}
	if s.db != nil {
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete([]byte(id)) }); err != nil {
			return fmt.Errorf("responsestore: delete %q: %w", id, err)
		}
	}
	s.lru.Remove(el)
	delete(s.items, id)
	return nil
}

// Len is the number of records held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// Size is the bound.
func (s *Store) Size() int { return s.size }

// Close closes the file, if any. It is idempotent; the store must not be
// used after it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}
