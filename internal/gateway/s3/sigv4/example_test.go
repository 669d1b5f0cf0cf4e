package sigv4_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

// A handler verifies the request, then reads the body only through the
// Result, and keeps what it read only if the body ended without an error.
func ExampleVerifier_Verify() {
	keys := map[string]string{"AKIDEXAMPLE": "secret"}
	v := &sigv4.Verifier{Secret: func(id string) (string, bool) { s, ok := keys[id]; return s, ok }}

	mux := http.NewServeMux()
	mux.HandleFunc("PUT /{bucket}/{key...}", func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Verify(r)
		if errors.Is(err, sigv4.ErrAnonymous) {
			err = &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Access Denied"}
		}
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body) // a staging write, in a real gateway
		}
		var e *sigv4.Error
		switch {
		case errors.As(err, &e):
			w.WriteHeader(e.Status)
			fmt.Fprintf(w, "<Error><Code>%s</Code><Message>%s</Message></Error>", e.Code, e.Message)
			return
		case err != nil: // the connection failed
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		// Commit the staged object for res.AccessKey.
	})
}
