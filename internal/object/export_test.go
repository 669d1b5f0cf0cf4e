package object

import "time"

// BufsMade is how many buffers the process's free lists have made so far.
func BufsMade() int64 { return bufsMade.Load() }

// DuplicateFreeBuffers counts the buffers that sit in a free list more
// than once: a buffer given back twice is later handed to two readers.
func DuplicateFreeBuffers() int {
	bufMu.Lock()
	defer bufMu.Unlock()
	dups := 0
	for _, l := range bufLists {
		seen := map[*byte]bool{}
		var held [][]byte
	drain:
		for {
			select {
			case b := <-l.free:
				held = append(held, b)
			default:
				break drain
			}
		}
		for _, b := range held {
			if seen[&b[:1][0]] {
				dups++
			}
			seen[&b[:1][0]] = true
			l.put(b)
		}
	}
	return dups
}

// PredictedRTT is the round trip to node the client predicts from
// network coordinates (0: it cannot yet).
func (c *Client) PredictedRTT(node string) time.Duration { return c.links.predictedRTT(node) }
