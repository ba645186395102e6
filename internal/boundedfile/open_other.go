//go:build !unix

package boundedfile

import "os"

// openNoBlock is os.Open where O_NONBLOCK does not exist; Read's Stat
// before the open refuses a FIFO there.
func openNoBlock(path string) (*os.File, error) {
	return os.Open(path)
}
