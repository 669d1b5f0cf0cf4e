package s3

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// S3's limits on tags.
const (
	maxObjectTags = 10
	maxBucketTags = 50
	maxTagKey     = 128 // Unicode characters
	maxTagValue   = 256
)

type tagXML struct {
	Key   string
	Value string
}

type taggingXML struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	TagSet  struct {
		Tags []tagXML `xml:"Tag"`
	}
}

func invalidTag(msg string) *Error { return s3err("InvalidTag", 400, msg) }

// checkTags applies S3's rules to a tag set: at most max tags, keys of
// 1-128 characters not starting with aws:, values of at most 256, no key
// twice.
func checkTags(tags []tagXML, max int, what string) (map[string]string, error) {
	if len(tags) > max {
		if what == "Object" {
			return nil, s3err("BadRequest", 400, fmt.Sprintf("Object tags cannot be greater than %d", max))
		}
		return nil, invalidTag(fmt.Sprintf("%s tags cannot be greater than %d", what, max))
	}
	out := make(map[string]string, len(tags))
	for _, t := range tags {
		switch {
		case t.Key == "" || !utf8.ValidString(t.Key):
			return nil, invalidTag("The TagKey you have provided is invalid")
		case utf8.RuneCountInString(t.Key) > maxTagKey:
			return nil, invalidTag(fmt.Sprintf("The TagKey you have provided is too long, max %d", maxTagKey))
		case !utf8.ValidString(t.Value):
			return nil, invalidTag("The TagValue you have provided is invalid")
		case utf8.RuneCountInString(t.Value) > maxTagValue:
			return nil, invalidTag(fmt.Sprintf("The TagValue you have provided is too long, max %d", maxTagValue))
		case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
			return nil, invalidTag("Your TagKey cannot be prefixed with aws:")
		}
		if _, dup := out[t.Key]; dup {
			return nil, invalidTag("Cannot provide multiple Tags with the same key")
		}
		out[t.Key] = t.Value
	}
	return out, nil
}

// tagsHeader reads x-amz-tagging (URL query encoded key=value pairs);
// nil if there is none.
func tagsHeader(h http.Header) (map[string]string, error) {
	v := h.Get("x-amz-tagging")
	if v == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(v)
	if err != nil {
		return nil, s3err("InvalidArgument", 400, "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
	}
	var tags []tagXML
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, invalidTag("Cannot provide multiple Tags with the same key")
		}
		tags = append(tags, tagXML{k, vs[0]})
	}
	return checkTags(tags, maxObjectTags, "Object")
}

// readTagging reads a Tagging document from a request body.
func readTagging(q *request, max int, what string) (map[string]string, error) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10+1))
	if err != nil {
		return nil, err
	}
	var t taggingXML
	if len(body) > 64<<10 || xml.Unmarshal(body, &t) != nil {
		return nil, errMalformedXML
	}
	return checkTags(t.TagSet.Tags, max, what)
}

// writeTagging answers a tag set, in key order.
func writeTagging(q *request, tags map[string]string) {
	out := taggingXML{NS: s3ns}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.TagSet.Tags = append(out.TagSet.Tags, tagXML{k, tags[k]})
	}
	q.xml(200, out)
}

// setTagCount sets x-amz-tagging-count on a GET or HEAD of an object
// with tags.
func setTagCount(h http.Header, tags map[string]string) {
	if len(tags) > 0 {
		h.Set("x-amz-tagging-count", strconv.Itoa(len(tags)))
	}
}

func (s *Server) putObjectTagging(q *request) {
	tags, err := readTagging(q, maxObjectTags, "Object")
	if err != nil {
		q.fail(err)
		return
	}
	info, err := s.gw.SetVersionTags(q.r.Context(), q.bucket, q.object, versionID(q), tags)
	if err != nil {
		q.fail(err)
		return
	}
	q.w.Header().Set("x-amz-version-id", gateway.VersionOf(info))
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) getObjectTagging(q *request) {
	info, _, err := s.gw.LookupVersion(q.r.Context(), q.bucket, q.object, versionID(q))
	if err != nil {
		q.fail(err)
		return
	}
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	writeTagging(q, info.Tags)
}

func (s *Server) deleteObjectTagging(q *request) {
	info, err := s.gw.SetVersionTags(q.r.Context(), q.bucket, q.object, versionID(q), nil)
	if err != nil {
		q.fail(err)
		return
	}
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	q.status = 204
	q.w.WriteHeader(204)
}

func (s *Server) putBucketTagging(q *request) {
	tags, err := readTagging(q, maxBucketTags, "Bucket")
	if err != nil {
		q.fail(err)
		return
	}
	doc, _ := json.Marshal(tags)
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "tagging", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

func (s *Server) getBucketTagging(q *request) {
	raw, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "tagging")
	if errors.Is(err, gateway.ErrNoConfig) {
		q.fail(s3err("NoSuchTagSet", 404, "The TagSet does not exist"))
		return
	}
	if err != nil {
		q.fail(err)
		return
	}
	var tags map[string]string
	if err := json.Unmarshal(raw, &tags); err != nil {
		q.fail(err)
		return
	}
	writeTagging(q, tags)
}

func (s *Server) deleteBucketTagging(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "tagging"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}
