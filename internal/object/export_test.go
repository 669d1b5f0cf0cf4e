package object

// BufsMade is how many buffers the process's free lists have made so far.
func BufsMade() int64 { return bufsMade.Load() }
