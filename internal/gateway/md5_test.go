package gateway

import (
	"crypto/md5"
	"encoding"
	"fmt"
	"hash"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	md5simd "github.com/minio/md5-simd"
)

// TestMD5s: uploads hashing at once get the same digests as crypto/md5,
// whether they hash alone or side by side in the SIMD lanes, for lengths
// around the 64-byte block and written in pieces of any size; and the
// count of uploads in flight goes back to zero.
func TestMD5s(t *testing.T) {
	var m md5s
	const uploads = 12
	start := make(chan struct{})
	var got, wg sync.WaitGroup
	got.Add(uploads)
	var mu sync.Mutex
	simd := 0
	for u := range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(u), 7))
			data := make([]byte, []int{0, 1, 63, 64, 65, 1000, 4096, 1 << 20, 3<<20 + 17}[u%9])
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			h, done := m.get()
			defer done()
			if isSIMD(h) {
				mu.Lock()
				simd++
				mu.Unlock()
			}
			got.Done()
			<-start // all twelve taken before any is used: most are SIMD lanes
			for p := data; len(p) > 0; {
				n := min(len(p), 1+rng.IntN(100<<10))
				h.Write(p[:n])
				p = p[n:]
			}
			want := md5.Sum(data)
			if got := h.Sum(nil); string(got) != string(want[:]) {
				t.Errorf("upload %d (%d bytes, SIMD %v): MD5 %x, want %x", u, len(data), isSIMD(h), got, want)
			}
		}()
	}
	got.Wait()
	close(start)
	wg.Wait()
	if simd < uploads-md5From {
		t.Errorf("%d of %d uploads hashed in SIMD lanes, want at least %d", simd, uploads, uploads-md5From)
	}
	if n := m.inFlight.Load(); n != 0 {
		t.Errorf("%d uploads still counted in flight", n)
	}
}

// isSIMD reports whether h is md5-simd's rather than the standard
// library's (which can save its state; md5-simd's cannot).
func isSIMD(h hash.Hash) bool {
	_, std := h.(encoding.BinaryMarshaler)
	return !std
}

// BenchmarkMD5 hashes 16 MiB per stream with 1, 4 and 8 streams at once,
// in crypto/md5 and in md5-simd's lanes, and reports the CPU time per
// MiB hashed: what md5From is chosen by.
func BenchmarkMD5(b *testing.B) {
	buf := make([]byte, 1<<20)
	for _, streams := range []int{1, 4, 8} {
		for _, simd := range []bool{false, true} {
			name := fmt.Sprintf("streams=%d/crypto", streams)
			if simd {
				name = fmt.Sprintf("streams=%d/simd", streams)
			}
			b.Run(name, func(b *testing.B) {
				srv := md5simd.NewServer()
				defer srv.Close()
				b.SetBytes(int64(streams) << 24)
				cpu0 := cpuTime()
				for range b.N {
					var wg sync.WaitGroup
					for range streams {
						wg.Add(1)
						go func() {
							defer wg.Done()
							var h hash.Hash = md5.New()
							if simd {
								sh := srv.NewHash()
								defer sh.Close()
								h = sh
							}
							for range 16 {
								h.Write(buf)
							}
							h.Sum(nil)
						}()
					}
					wg.Wait()
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*streams*16), "cpu-µs/MiB")
			})
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
