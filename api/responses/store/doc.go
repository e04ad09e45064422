// Package store keeps the stored responses of the OpenAI Responses
// API (POST /v1/responses with "store": true): one opaque record per
// response id, so that GET /v1/responses/{id}, its input_items and a later
// request's previous_response_id can find it.
//
// The store is bounded: it holds at most Size records and evicts the least
// recently used one (read or written) when a new one comes. Without a
// directory it lives in memory only and is lost on restart, as vLLM's
// store is. With a directory (serve --responses-store-dir) every write
// also goes to one bbolt file there, responses.db, and Open loads it back,
// so stored conversations survive a restart.
//
// Why bbolt (go.etcd.io/bbolt) and not SQLite: it is pure Go (no cgo, so
// this package builds, vets and runs its tests under -race without a C
// toolchain, and adds nothing to the llama.cpp build), it is one file with
// ACID transactions and a crash-safe copy-on-write B+tree, and a key-value
// map from id to record is all the store needs: it never queries by
// anything but the id. SQLite in Go is either cgo (mattn/go-sqlite3) or a
// large transpiled library (modernc.org/sqlite) for no query we would run.
//
// Records are the caller's bytes; the store does not read them. The LRU
// order is kept in memory; on disk each record carries the sequence number
// of its last write, and Open restores the order from it (reads before a
// restart are not remembered: a record read but not written since counts
// as old as its last write).
//
// A Store is safe for concurrent use.
package store
