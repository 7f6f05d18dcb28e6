// Command go-interop is the Go bbolt side of rbolt's interoperability suite
// (harness/rbolt-interop): it checks a database file with Go bbolt's tx.Check, dumps its
// content in the manifest format (tests/data/bbolt/README.md), and writes on it with a seeded
// random workload, so that files rbolt writes are proven to be files Go bbolt can go on
// writing, and the other way round.
//
//	go-interop check FILE                       tx.Check; each error on its own line
//	go-interop dump FILE                        the manifest of FILE on stdout
//	go-interop write FILE --seed N [options]    the workload, then a check and a dump
//	go-interop die-writing FILE --seed N --bytes N [--limit N] [--small]
//	                                            a transaction that dies after its pages
//
// write opens (or creates) FILE with the given options and StrictMode (bbolt checks the
// whole file before every meta write and panics on a problem), reads its content into a
// model, runs --txs transactions of --ops random operations on the file and the model, then
// checks the file and compares its dump with the model, and writes the model as a manifest
// to --model-out. Exit status: 0 done, 1 bad arguments or the file would not open, 2 check
// errors, 3 the dump differs from the model, 4 a write failed or panicked. --read-only opens
// FILE read-only (check and dump). --timeout D gives up on the file lock after D (bbolt's
// Options.Timeout: "open FILE: timeout", exit 1); by default the open waits for it.
//
// die-writing is a Go writer that dies mid-commit after a crash of rbolt's: it opens FILE
// read-write under a file size limit (RLIMIT_FSIZE) of --limit bytes (0: FILE's size) and
// runs one transaction that puts about --bytes bytes into a new bucket "go-uncommitted"
// (--small: values of up to an eighth of a page, else a quarter to three quarters of one).
// bbolt writes a commit's pages in page order, the reused free pages first, and its meta
// last; the first page at or past the limit fails with EFBIG, and the transaction ends
// there, its pages below the limit written and its meta not. (NoGrowSync: else bbolt's
// ftruncate would fail first, before any page is written.) It prints "died: ERROR" and
// exits 0 without closing the file; a transaction that committed, or failed otherwise,
// exits 4.
//
// Build (Debian's golang-go and golang-github-coreos-bbolt-dev, bbolt 1.3.6 in GOPATH layout):
//
//	GO111MODULE=off GOPATH=$TMP:/usr/share/gocode go build -o go-interop .
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

const (
	exitOK       = 0
	exitUsage    = 1
	exitCheck    = 2
	exitMismatch = 3
	exitWrite    = 4
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: go-interop check|dump|write FILE [options]")
		os.Exit(exitUsage)
	}
	command, path := os.Args[1], os.Args[2]
	flags := flag.NewFlagSet(command, flag.ExitOnError)
	seed := flags.Int64("seed", 1, "seed of the workload")
	txs := flags.Int("txs", 4, "write transactions")
	ops := flags.Int("ops", 200, "operations per transaction")
	pageSize := flags.Int("page-size", 4096, "page size of a file this creates")
	freelist := flags.String("freelist", "array", "freelist type: array or map")
	noFreelistSync := flags.Bool("no-freelist-sync", false, "NoFreelistSync")
	big := flags.Bool("big", false, "values of 1 to 10 MB too")
	deep := flags.Int("deep", 0, "nest a chain of buckets this deep")
	bigFreelist := flags.Bool("big-freelist", false, "free more than 65,535 pages at once")
	modelOut := flags.String("model-out", "", "where to write the model's manifest")
	readOnly := flags.Bool("read-only", false, "open the file read-only")
	total := flags.Int("bytes", 0, "die-writing: the bytes of values to put")
	limit := flags.Int64("limit", 0, "die-writing: the file size limit (0: the file's size)")
	small := flags.Bool("small", false, "die-writing: values of up to an eighth of a page")
	timeout := flags.Duration("timeout", 0, "how long to wait for the file lock (0: for ever)")
	if err := flags.Parse(os.Args[3:]); err != nil {
		os.Exit(exitUsage)
	}
	options := &bolt.Options{
		PageSize:       *pageSize,
		NoFreelistSync: *noFreelistSync,
		FreelistType:   bolt.FreelistArrayType,
		ReadOnly:       *readOnly,
		Timeout:        *timeout,
	}
	if *freelist == "map" {
		options.FreelistType = bolt.FreelistMapType
	}
	switch command {
	case "check":
		os.Exit(check(path, options))
	case "dump":
		os.Exit(dump(path, options))
	case "write":
		w := workload{
			rng:         rand.New(rand.NewSource(*seed)),
			txs:         *txs,
			ops:         *ops,
			big:         *big,
			deep:        *deep,
			bigFreelist: *bigFreelist,
		}
		os.Exit(w.run(path, options, *modelOut))
	case "die-writing":
		os.Exit(dieWriting(path, options, dying{seed: *seed, total: *total, limit: *limit, small: *small}))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", command)
		os.Exit(exitUsage)
	}
}

// checkErrors runs tx.Check on db and returns its errors as text.
func checkErrors(db *bolt.DB) ([]string, error) {
	var found []string
	err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			found = append(found, err.Error())
		}
		return nil
	})
	return found, err
}

func check(path string, options *bolt.Options) int {
	db, err := bolt.Open(path, 0o600, options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", path, err)
		return exitUsage
	}
	defer db.Close()
	found, err := checkErrors(db)
	if err != nil {
		fmt.Fprintf(os.Stderr, "check %s: %v\n", path, err)
		return exitUsage
	}
	for _, line := range found {
		fmt.Println(line)
	}
	if len(found) > 0 {
		fmt.Printf("%d errors found\n", len(found))
		return exitCheck
	}
	fmt.Println("OK")
	return exitOK
}

func dump(path string, options *bolt.Options) int {
	db, err := bolt.Open(path, 0o600, options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", path, err)
		return exitUsage
	}
	defer db.Close()
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	err = db.View(func(tx *bolt.Tx) error { return dumpTx(tx, out) })
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dump %s: %v\n", path, err)
		return exitUsage
	}
	return exitOK
}

// dying is what die-writing does: the seed of its keys and values, the bytes of values it
// puts, its file size limit (0: the file's size), and whether its values are small (up to an
// eighth of a page: full leaves, few branches) or not (a quarter to three quarters of a page).
type dying struct {
	seed  int64
	total int
	limit int64
	small bool
}

func dieWriting(path string, options *bolt.Options, d dying) int {
	limit := d.limit
	if limit == 0 {
		info, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stat %s: %v\n", path, err)
			return exitUsage
		}
		limit = info.Size()
	}
	// A write past the limit raises SIGXFSZ, whose default action ends the process before
	// the write returns EFBIG.
	signal.Ignore(syscall.SIGXFSZ)
	rlimit := syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rlimit); err != nil {
		fmt.Fprintf(os.Stderr, "setrlimit: %v\n", err)
		return exitUsage
	}
	options.NoGrowSync = true
	db, err := bolt.Open(path, 0o600, options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", path, err)
		return exitUsage
	}
	rng := rand.New(rand.NewSource(d.seed))
	pageSize := db.Info().PageSize
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("go-uncommitted"))
		if err != nil {
			return err
		}
		for put := 0; put < d.total; {
			key := []byte(fmt.Sprintf("go%08x", rng.Uint32()))
			value := make([]byte, pageSize/4+rng.Intn(pageSize/2))
			if d.small {
				value = make([]byte, rng.Intn(pageSize/8))
			}
			rng.Read(value)
			if err := b.Put(key, value); err != nil {
				return err
			}
			put += len(value)
		}
		return nil
	})
	if err == nil {
		fmt.Fprintln(os.Stderr, "the transaction committed: the file size limit did not stop it")
		return exitWrite
	}
	if !errors.Is(err, syscall.EFBIG) {
		fmt.Fprintf(os.Stderr, "the transaction failed otherwise than on the size limit: %v\n", err)
		return exitWrite
	}
	fmt.Printf("died: %v\n", err)
	// Dead: no Close (which would write nothing more anyway).
	os.Exit(exitOK)
	return exitOK
}

// ---- The manifest format ---------------------------------------------------------------

// writeName writes a bucket name as the manifest spells it: a JSON string when the name is
// UTF-8 without control characters (only `"` and `\` escaped), else {"hex":"..."}.
func writeName(w io.Writer, name []byte) {
	text := string(name)
	plain := utf8.Valid(name)
	for _, r := range text {
		if unicode.IsControl(r) {
			plain = false
		}
	}
	if !plain {
		fmt.Fprintf(w, `{"hex":"%s"}`, hex.EncodeToString(name))
		return
	}
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range text {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	w.Write(b.Bytes())
}

func writePrefix(w io.Writer, path [][]byte) {
	io.WriteString(w, `{"bucket":[`)
	for i, name := range path {
		if i > 0 {
			io.WriteString(w, ",")
		}
		writeName(w, name)
	}
	io.WriteString(w, "]")
}

func writeSequence(w io.Writer, path [][]byte, sequence uint64) {
	writePrefix(w, path)
	fmt.Fprintf(w, `,"sequence":%s}`+"\n", strconv.FormatUint(sequence, 10))
}

func writeValue(w io.Writer, path [][]byte, key, value []byte) {
	writePrefix(w, path)
	fmt.Fprintf(w, `,"key":"%s","value":"%s"}`+"\n", hex.EncodeToString(key), hex.EncodeToString(value))
}

// dumpTx writes the whole database in manifest form, depth-first in key order.
func dumpTx(tx *bolt.Tx, w io.Writer) error {
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return dumpBucket(w, [][]byte{append([]byte(nil), name...)}, b)
	})
}

func dumpBucket(w io.Writer, path [][]byte, b *bolt.Bucket) error {
	writeSequence(w, path, b.Sequence())
	return b.ForEach(func(k, v []byte) error {
		if v != nil {
			writeValue(w, path, k, v)
			return nil
		}
		child := b.Bucket(k)
		if child == nil {
			return fmt.Errorf("key %x holds neither a value nor a bucket", k)
		}
		nested := append(append([][]byte(nil), path...), append([]byte(nil), k...))
		return dumpBucket(w, nested, child)
	})
}

// ---- The model -------------------------------------------------------------------------

type bucket struct {
	sequence uint64
	values   map[string][]byte
	children map[string]*bucket
}

func newBucket() *bucket {
	return &bucket{values: map[string][]byte{}, children: map[string]*bucket{}}
}

func loadBucket(b *bolt.Bucket) (*bucket, error) {
	model := newBucket()
	model.sequence = b.Sequence()
	err := b.ForEach(func(k, v []byte) error {
		if v != nil {
			model.values[string(k)] = append([]byte(nil), v...)
			return nil
		}
		child, err := loadBucket(b.Bucket(k))
		model.children[string(k)] = child
		return err
	})
	return model, err
}

func loadModel(tx *bolt.Tx) (*bucket, error) {
	root := newBucket()
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		child, err := loadBucket(b)
		root.children[string(name)] = child
		return err
	})
	return root, err
}

// sortedKeys returns the keys of the values and children of b, in bytewise order.
func (b *bucket) sortedKeys() []string {
	keys := make([]string, 0, len(b.values)+len(b.children))
	for k := range b.values {
		keys = append(keys, k)
	}
	for k := range b.children {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (b *bucket) sortedValueKeys() []string {
	keys := make([]string, 0, len(b.values))
	for k := range b.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeModel(w io.Writer, path [][]byte, b *bucket) {
	for _, k := range b.sortedKeys() {
		if v, ok := b.values[k]; ok {
			writeValue(w, path, []byte(k), v)
			continue
		}
		nested := append(append([][]byte(nil), path...), []byte(k))
		child := b.children[k]
		writeSequence(w, nested, child.sequence)
		writeModel(w, nested, child)
	}
}

func manifestOf(root *bucket) string {
	var out bytes.Buffer
	writeModel(&out, nil, root)
	return out.String()
}

// ---- The workload ----------------------------------------------------------------------

type workload struct {
	rng         *rand.Rand
	txs, ops    int
	big         bool
	deep        int
	bigFreelist bool
	root        *bucket
}

// paths lists every bucket of the model (not the root), depth-first.
func (w *workload) paths() [][]string {
	var out [][]string
	var walk func(prefix []string, b *bucket)
	walk = func(prefix []string, b *bucket) {
		names := make([]string, 0, len(b.children))
		for name := range b.children {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			path := append(append([]string(nil), prefix...), name)
			out = append(out, path)
			walk(path, b.children[name])
		}
	}
	walk(nil, w.root)
	return out
}

func (w *workload) modelAt(path []string) *bucket {
	b := w.root
	for _, name := range path {
		b = b.children[name]
	}
	return b
}

func bucketAt(tx *bolt.Tx, path []string) *bolt.Bucket {
	b := tx.Bucket([]byte(path[0]))
	for _, name := range path[1:] {
		b = b.Bucket([]byte(name))
	}
	return b
}

func (w *workload) bytes(n int) []byte {
	out := make([]byte, n)
	w.rng.Read(out)
	return out
}

// valueLen draws a value length: mostly small, sometimes spanning pages (overflow).
func (w *workload) valueLen() int {
	switch r := w.rng.Intn(100); {
	case r < 60:
		return w.rng.Intn(64)
	case r < 85:
		return 64 + w.rng.Intn(400)
	case r < 95:
		return 400 + w.rng.Intn(3000)
	case r < 99:
		return 3000 + w.rng.Intn(20000)
	default:
		return 20000 + w.rng.Intn(80000)
	}
}

// newKey draws a key for bucket b that it does not hold: spread out, after the last key
// (a sorted load), below every key (the leftmost path), or binary.
func (w *workload) newKey(b *bucket) []byte {
	for {
		var key []byte
		switch r := w.rng.Intn(100); {
		case r < 45:
			key = []byte(fmt.Sprintf("k%08x", w.rng.Uint32()))
		case r < 65:
			key = []byte(fmt.Sprintf("k%08x", 0xF0000000+w.rng.Uint32()%0x0FFFFFFF))
		case r < 80:
			key = append([]byte{0x01}, w.bytes(1+w.rng.Intn(12))...)
		default:
			key = w.bytes(1 + w.rng.Intn(40))
		}
		if _, ok := b.values[string(key)]; ok {
			continue
		}
		if _, ok := b.children[string(key)]; ok {
			continue
		}
		return key
	}
}

// newName draws a bucket name: text (some of it needing escapes or beyond ASCII), or binary.
func (w *workload) newName(b *bucket) string {
	for {
		var name string
		switch r := w.rng.Intn(10); {
		case r < 5:
			name = fmt.Sprintf("b%d", w.rng.Intn(1000))
		case r < 7:
			name = fmt.Sprintf("é\"\\%d", w.rng.Intn(100))
		default:
			name = string(w.bytes(1 + w.rng.Intn(8)))
		}
		if _, ok := b.values[name]; ok {
			continue
		}
		if _, ok := b.children[name]; ok {
			continue
		}
		return name
	}
}

func (w *workload) run(path string, options *bolt.Options, modelOut string) (status int) {
	db, err := bolt.Open(path, 0o600, options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", path, err)
		return exitUsage
	}
	defer db.Close()
	db.StrictMode = true
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "write panicked: %v\n", r)
			status = exitWrite
		}
	}()
	if err := db.View(func(tx *bolt.Tx) error {
		var err error
		w.root, err = loadModel(tx)
		return err
	}); err != nil {
		fmt.Fprintf(os.Stderr, "read %s: %v\n", path, err)
		return exitWrite
	}
	for t := 0; t < w.txs; t++ {
		if err := db.Update(func(tx *bolt.Tx) error { return w.transaction(tx, t) }); err != nil {
			fmt.Fprintf(os.Stderr, "transaction %d: %v\n", t, err)
			return exitWrite
		}
	}
	if modelOut != "" {
		if err := os.WriteFile(modelOut, []byte(manifestOf(w.root)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "write %s: %v\n", modelOut, err)
			return exitUsage
		}
	}
	found, err := checkErrors(db)
	if err != nil || len(found) > 0 {
		fmt.Fprintf(os.Stderr, "check after writing: %v %v\n", err, found)
		return exitCheck
	}
	var dumped bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error { return dumpTx(tx, &dumped) }); err != nil {
		fmt.Fprintf(os.Stderr, "dump after writing: %v\n", err)
		return exitWrite
	}
	if dumped.String() != manifestOf(w.root) {
		fmt.Fprintln(os.Stderr, "the dump after writing differs from the model")
		return exitMismatch
	}
	return exitOK
}

// transaction runs one transaction's operations. A bucket is deleted only as a
// transaction's first operation: bbolt's DeleteBucket leaks the pages of nested buckets
// written earlier in the same transaction (tests/data/bbolt/README.md), a bug of Go's own.
func (w *workload) transaction(tx *bolt.Tx, t int) error {
	if w.rng.Intn(4) == 0 {
		if err := w.deleteBucket(tx); err != nil {
			return err
		}
	}
	if t == 0 && w.deep > 0 {
		if err := w.deepChain(tx); err != nil {
			return err
		}
	}
	if w.bigFreelist && t < 2 {
		return w.bigFree(tx, t)
	}
	for i := 0; i < w.ops; i++ {
		if err := w.op(tx); err != nil {
			return err
		}
	}
	if err := w.bulk(tx); err != nil {
		return err
	}
	if err := w.wide(tx); err != nil {
		return err
	}
	if w.big && w.rng.Intn(2) == 0 {
		return w.bigValue(tx)
	}
	return nil
}

func (w *workload) ensureTop(tx *bolt.Tx, name string) (*bolt.Bucket, *bucket, error) {
	b, err := tx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, nil, err
	}
	model, ok := w.root.children[name]
	if !ok {
		model = newBucket()
		w.root.children[name] = model
	}
	return b, model, nil
}

func (w *workload) op(tx *bolt.Tx) error {
	paths := w.paths()
	if len(paths) == 0 || w.rng.Intn(20) == 0 {
		name := w.newName(w.root)
		if _, err := tx.CreateBucket([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %x: %v", name, err)
		}
		w.root.children[name] = newBucket()
		return nil
	}
	path := paths[w.rng.Intn(len(paths))]
	b, model := bucketAt(tx, path), w.modelAt(path)
	switch r := w.rng.Intn(100); {
	case r < 40:
		key, value := w.newKey(model), w.bytes(w.valueLen())
		model.values[string(key)] = value
		return b.Put(key, value)
	case r < 52:
		keys := model.sortedValueKeys()
		if len(keys) == 0 {
			return nil
		}
		key := keys[w.rng.Intn(len(keys))]
		value := w.bytes(w.valueLen())
		model.values[key] = value
		return b.Put([]byte(key), value)
	case r < 64:
		return w.deletes(b, model)
	case r < 70:
		name := w.newName(model)
		if _, err := b.CreateBucket([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %x: %v", name, err)
		}
		model.children[name] = newBucket()
		return nil
	case r < 76:
		if w.rng.Intn(2) == 0 {
			next, err := b.NextSequence()
			model.sequence = next
			return err
		}
		model.sequence = w.rng.Uint64() >> uint(w.rng.Intn(64))
		return b.SetSequence(model.sequence)
	default:
		// A bucket split with a fill percent of its own (not stored in the file).
		fill, fillModel, err := w.ensureTop(tx, "fill")
		if err != nil {
			return err
		}
		fill.FillPercent = 0.1 + 0.9*w.rng.Float64()
		for i := 0; i < 20; i++ {
			key, value := w.newKey(fillModel), w.bytes(w.rng.Intn(200))
			fillModel.values[string(key)] = value
			if err := fill.Put(key, value); err != nil {
				return err
			}
		}
		return nil
	}
}

// deletes deletes one key, the bucket's first key, or a run of consecutive keys (whole
// pages, and the first keys of the pages after them).
func (w *workload) deletes(b *bolt.Bucket, model *bucket) error {
	keys := model.sortedValueKeys()
	if len(keys) == 0 {
		return nil
	}
	from, n := w.rng.Intn(len(keys)), 1
	switch w.rng.Intn(4) {
	case 0:
		from = 0
	case 1:
		n = 5 + w.rng.Intn(300)
	}
	for _, key := range keys[from:min(from+n, len(keys))] {
		delete(model.values, key)
		if err := b.Delete([]byte(key)); err != nil {
			return err
		}
	}
	return nil
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// kept names the top-level buckets of the workload's own parts, which random deletes leave
// alone (and everything in them: the deep chain stays whole).
var kept = map[string]bool{"fill": true, "deep": true, "big": true, "bulk": true, "wide": true, "bigfree": true}

func (w *workload) deleteBucket(tx *bolt.Tx) error {
	paths := w.paths()
	if len(paths) == 0 {
		return nil
	}
	path := paths[w.rng.Intn(len(paths))]
	if kept[path[0]] {
		return nil
	}
	parent := w.modelAt(path[:len(path)-1])
	delete(parent.children, path[len(path)-1])
	if len(path) == 1 {
		return tx.DeleteBucket([]byte(path[0]))
	}
	return bucketAt(tx, path[:len(path)-1]).DeleteBucket([]byte(path[len(path)-1]))
}

// deepChain nests buckets `deep` levels below a top-level bucket "deep", a key in each.
func (w *workload) deepChain(tx *bolt.Tx) error {
	b, model, err := w.ensureTop(tx, "deep")
	if err != nil {
		return err
	}
	for level := 0; level < w.deep; level++ {
		key := []byte(fmt.Sprintf("level%04d", level))
		model.values[string(key)] = key
		if err := b.Put(key, key); err != nil {
			return err
		}
		child, ok := model.children["d"]
		if !ok {
			child = newBucket()
			model.children["d"] = child
		}
		if b, err = b.CreateBucketIfNotExists([]byte("d")); err != nil {
			return err
		}
		model = child
	}
	return nil
}

// bigValue puts a value of 1 to 10 MB into the top-level bucket "big", replacing one.
func (w *workload) bigValue(tx *bolt.Tx) error {
	b, model, err := w.ensureTop(tx, "big")
	if err != nil {
		return err
	}
	key := []byte(fmt.Sprintf("v%d", w.rng.Intn(3)))
	value := w.bytes(1<<20 + w.rng.Intn(9<<20))
	model.values[string(key)] = value
	return b.Put(key, value)
}

// bigFree puts four 10 MB values (transaction 0) and deletes them (transaction 1): at
// small pages more than 65,535 ids are freed at once, and the freelist page takes the
// 0xFFFF count rule.
func (w *workload) bigFree(tx *bolt.Tx, t int) error {
	b, model, err := w.ensureTop(tx, "bigfree")
	if err != nil {
		return err
	}
	for i := 0; i < 4; i++ {
		key := []byte(fmt.Sprintf("free%d", i))
		if t == 0 {
			value := w.bytes(10 << 20)
			model.values[string(key)] = value
			if err := b.Put(key, value); err != nil {
				return err
			}
		} else {
			delete(model.values, string(key))
			if err := b.Delete(key); err != nil {
				return err
			}
		}
	}
	return nil
}

// bulk grows or thins the top-level bucket "bulk" by hundreds of keys at once: keys long
// enough (a 32nd of a page) that its tree is three or four levels deep at any page size, so
// that deletes empty whole pages and branches, and branches merge.
func (w *workload) bulk(tx *bolt.Tx) error {
	b, model, err := w.ensureTop(tx, "bulk")
	if err != nil {
		return err
	}
	keyLen := tx.DB().Info().PageSize / 32
	keys := model.sortedValueKeys()
	switch r := w.rng.Intn(10); {
	case r < 5 || len(keys) < 200:
		sorted := w.rng.Intn(2) == 0
		start := w.rng.Uint32()
		for i, n := 0, 600+w.rng.Intn(900); i < n; i++ {
			prefix := w.rng.Uint32()
			if sorted {
				prefix = start + uint32(i)
			}
			key := []byte(fmt.Sprintf("%08x", prefix))
			key = append(key, bytes.Repeat([]byte{'x'}, keyLen)...)
			value := w.bytes(w.rng.Intn(24))
			model.values[string(key)] = value
			if err := b.Put(key, value); err != nil {
				return err
			}
		}
	case r < 8:
		// A run of consecutive keys: whole pages, and the first keys of the pages after.
		from := w.rng.Intn(len(keys))
		for _, key := range keys[from:min(from+100+w.rng.Intn(1400), len(keys))] {
			delete(model.values, key)
			if err := b.Delete([]byte(key)); err != nil {
				return err
			}
		}
	default:
		// Every other (or third) key of a range: pages thinned until they merge.
		from, step := w.rng.Intn(len(keys)), 2+w.rng.Intn(2)
		to := min(from+300+w.rng.Intn(1700), len(keys))
		for i := from; i < to; i += step {
			delete(model.values, keys[i])
			if err := b.Delete([]byte(keys[i])); err != nil {
				return err
			}
		}
	}
	return nil
}

// wide puts values of a quarter to three quarters of a page into the top-level bucket
// "wide", so that its leaves hold one to three entries each, then deletes a quarter of its
// keys at random: leaves empty out one by one while their neighbours stay untouched, and the
// branches above them shrink until they merge.
func (w *workload) wide(tx *bolt.Tx) error {
	b, model, err := w.ensureTop(tx, "wide")
	if err != nil {
		return err
	}
	pageSize := tx.DB().Info().PageSize
	for i, n := 0, 50+w.rng.Intn(150); i < n; i++ {
		key := []byte(fmt.Sprintf("%08x", w.rng.Uint32()))
		key = append(key, bytes.Repeat([]byte{'w'}, pageSize/32)...)
		value := w.bytes(pageSize/4 + w.rng.Intn(pageSize/2))
		model.values[string(key)] = value
		if err := b.Put(key, value); err != nil {
			return err
		}
	}
	keys := model.sortedValueKeys()
	for i := 0; i < len(keys)/4; i++ {
		key := keys[w.rng.Intn(len(keys))]
		if _, ok := model.values[key]; !ok {
			continue
		}
		delete(model.values, key)
		if err := b.Delete([]byte(key)); err != nil {
			return err
		}
	}
	return nil
}
