// Calls a Relay endpoint four ways: an async call, a call safe to repeat (Idempotency-Key), a
// delayed call (Relay-Delay), and one Relay refuses, to read its error body.
//
//	RELAY_URL=http://localhost:8787/demo/v1/orders RELAY_API_KEY=rk_live_... go run ./caller
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

// Accepted is an async endpoint's 202: {"status": "queued" | "scheduled", "requestId": "req_..."}.
type Accepted struct {
	Status    string `json:"status"`
	RequestID string `json:"requestId"`
}

// RelayError is a call Relay refused: its HTTP status and the
// {"error": {"code", "message"}} it sent.
type RelayError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *RelayError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

var client = &http.Client{Timeout: 30 * time.Second}

// relay POSTs body as JSON with the given headers.
func relay(body any, headers map[string]string) (*Accepted, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, os.Getenv("RELAY_URL"), bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("RELAY_API_KEY"))
	req.Header.Set("Content-Type", "application/json")
	for name, value := range headers {
		req.Header.Set(name, value)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var refused struct {
			Error RelayError `json:"error"`
		}
		if err := json.NewDecoder(res.Body).Decode(&refused); err != nil {
			return nil, fmt.Errorf("status %d: %w", res.StatusCode, err)
		}
		refused.Error.Status = res.StatusCode
		return nil, &refused.Error
	}
	var accepted Accepted
	return &accepted, json.NewDecoder(res.Body).Decode(&accepted)
}

func main() {
	// 1. An async call: queued at once, then delivered to every target, retried until it is.
	queued, err := relay(map[string]any{"order": 1001, "total": 25}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("async call: %s %s\n", queued.Status, queued.RequestID)

	// 2. With an Idempotency-Key, a repeat (after a timeout, a 503) queues nothing again: it
	//    gets the first call's answer, the same requestId.
	key := map[string]string{"Idempotency-Key": "order-1002"}
	first, err := relay(map[string]any{"order": 1002, "total": 40}, key)
	if err != nil {
		log.Fatal(err)
	}
	repeat, err := relay(map[string]any{"order": 1002, "total": 40}, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("idempotent call: %s, repeated: %s\n", first.RequestID, repeat.RequestID)

	// 3. A delayed call: scheduled now, delivered in 10 seconds (or at Relay-Not-Before:
	//    <RFC 3339 time>).
	delay := map[string]string{"Relay-Delay": "10s"}
	scheduled, err := relay(map[string]any{"order": 1003, "remind": true}, delay)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("delayed call: %s %s\n", scheduled.Status, scheduled.RequestID)

	// 4. A refusal: more than 7 days ahead is 400 bad_request.
	_, err = relay(map[string]any{"order": 1004}, map[string]string{"Relay-Delay": "8d"})
	var refused *RelayError
	if !errors.As(err, &refused) {
		log.Fatalf("expected a refusal, got %v", err)
	}
	fmt.Printf("refused: %d %s: %s\n", refused.Status, refused.Code, refused.Message)
}
