package redisfence_test

import (
	"context"
	"errors"
	"log"
	"os"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/redisfence"
)

// A program run by `leaseside run jobs/report` sets the report under its
// lease's token: a newer holder's token refuses it, and nothing is
// written.
func ExampleSet() {
	token, err := strconv.ParseUint(os.Getenv("LEASESIDE_TOKEN"), 10, 64)
	if err != nil {
		log.Fatal(err)
	}
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	err = redisfence.Set(context.Background(), c, "report:daily", "rows: 42", os.Getenv("LEASESIDE_LEASE"), token)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		log.Fatalf("token %d is below %d: this holder lost the lease", stale.Token, stale.Highest)
	} else if err != nil {
		log.Fatal(err)
	}
}
