package router

import "container/list"

// maxRouteKeys bounds the routing keys the router remembers; the least
// recently used is forgotten first.
const maxRouteKeys = 4096

// routeKeys maps routing keys to the worker each last went to, in least
// recently used order. The zero value is empty and ready.
type routeKeys struct {
	order *list.List               // of routeKey, the most recently used at the back
	byKey map[string]*list.Element // into order
}

type routeKey struct{ key, addr string }

// get returns the worker key last went to; "" has none.
func (k *routeKeys) get(key string) (string, bool) {
	if key == "" || k.byKey == nil {
		return "", false
	}
	e, ok := k.byKey[key]
	if !ok {
		return "", false
	}
	k.order.MoveToBack(e)
	return e.Value.(routeKey).addr, true
}

// put remembers that key went to addr.
func (k *routeKeys) put(key, addr string) {
	if key == "" {
		return
	}
	if k.byKey == nil {
		k.order, k.byKey = list.New(), map[string]*list.Element{}
	}
	if e, ok := k.byKey[key]; ok {
		e.Value = routeKey{key, addr}
		k.order.MoveToBack(e)
		return
	}
	k.byKey[key] = k.order.PushBack(routeKey{key, addr})
	if k.order.Len() > maxRouteKeys {
		oldest := k.order.Front()
		k.order.Remove(oldest)
		delete(k.byKey, oldest.Value.(routeKey).key)
	}
}
