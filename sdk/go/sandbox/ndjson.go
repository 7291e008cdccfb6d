package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// ndjsonReader reads a streaming NDJSON response (one JSON value a line), each line at
// most max bytes. It is the reader of every event stream: process output, background
// output, code executions and directory watches. Its Read hands on what is buffered
// (to drain the rest of a body).
type ndjsonReader struct {
	*bufio.Reader
	max int
}

func newNDJSONReader(r io.Reader, max int) *ndjsonReader {
	return &ndjsonReader{Reader: bufio.NewReaderSize(r, 64<<10), max: max}
}

// line returns the next line without its newline. A line longer than max is
// ErrTooLarge; the end of the stream is the reader's error (io.EOF), also when it cuts
// a line short.
func (n *ndjsonReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := n.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > n.max {
			return nil, fmt.Errorf("%w: event line over %d bytes", ErrTooLarge, n.max)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// decode reads the next line that is not blank (blank lines are heartbeats) into v.
func (n *ndjsonReader) decode(v any) error {
	for {
		line, err := n.line()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("bad event: %w", err)
		}
		return nil
	}
}
