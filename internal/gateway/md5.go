package gateway

import (
	"crypto/md5"
	"hash"
	"sync"
	"sync/atomic"

	md5simd "github.com/minio/md5-simd"
)

// md5From is how many uploads must be hashing at once for a new one to
// take a lane of the SIMD hasher (md5-simd, MinIO's: up to 16 MD5s side
// by side on one core). On this project's benchmark machine it spent
// 1.8-2.4 times less CPU per byte than crypto/md5 with eight streams,
// 1.15-1.3 times less with four, and 1.4-1.6 times more alone
// (BenchmarkMD5, docs/benchmarks.md).
const md5From = 4

// md5s hands out the MD5 hashes that make uploads' ETags.
type md5s struct {
	inFlight atomic.Int32
	once     sync.Once
	srv      md5simd.Server
}

// get returns a hash for one upload and the function that gives it back
// when the upload is done.
func (m *md5s) get() (hash.Hash, func()) {
	if m.inFlight.Add(1) < md5From {
		return md5.New(), func() { m.inFlight.Add(-1) }
	}
	m.once.Do(func() { m.srv = md5simd.NewServer() })
	h := m.srv.NewHash()
	return h, func() {
		h.Close()
		m.inFlight.Add(-1)
	}
}
