// Receives Relay's deliveries: checks each signature with Standard Webhooks' library, drops the
// duplicates at-least-once delivery brings, and answers 2xx before doing the work.
//
//	RELAY_SIGNING_SECRET=whsec_... PORT=8000 go run ./receiver
package main

import (
	"cmp"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// handle is the work itself, after the answer; here, a line.
func handle(deliveryID, requestID string, body []byte) {
	log.Printf("verified delivery %s of %s: %s", deliveryID, requestID, body)
}

func main() {
	secret := os.Getenv("RELAY_SIGNING_SECRET")
	webhook, err := standardwebhooks.NewWebhook(secret)
	if err != nil || secret == "" {
		log.Fatalf("RELAY_SIGNING_SECRET must be the endpoint's whsec_ secret (%v)", err)
	}
	var mu sync.Mutex
	// Delivery ids already taken. In production: a unique key in your database, set with the work.
	seen := map[string]bool{}

	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // the raw bytes: verify them before parsing
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		// Fails unless a signature matches and webhook-timestamp is within 5 minutes of now.
		if err := webhook.Verify(body, r.Header); err != nil {
			log.Printf("refused: %v", err)
			http.Error(w, "invalid signature", http.StatusBadRequest)
			return
		}
		// The X-Relay-Delivery-Id, sent again as webhook-id, which the signature covers: the same
		// on every retry of this delivery.
		deliveryID := r.Header.Get("webhook-id")
		mu.Lock()
		duplicate := seen[deliveryID]
		seen[deliveryID] = true
		mu.Unlock()
		if duplicate {
			log.Printf("duplicate delivery %s, dropped", deliveryID)
		} else {
			go handle(deliveryID, r.Header.Get("X-Relay-Request-Id"), body)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	port := cmp.Or(os.Getenv("PORT"), "8000")
	log.Printf("receiver listening on port %s", port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
