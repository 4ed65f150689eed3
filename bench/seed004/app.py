"""Seed 004's HTTP API: a small Flask app served by gunicorn on a unix socket behind the proxy.

The article (seeds/004) shows the API only from outside: `gunicorn api:app --workers=5
--bind=unix:api.sock`, load with `wrk ... http://api.endpoint/resource`, a cache on
`location /api-endpoint/`, content that changes once a day, and responses of about 930 bytes on
the wire with nginx's headers (29.59 MB for 33,329 responses), i.e. a JSON body of about 750
bytes. This app answers both paths with such a JSON document: a list of records stamped with
today's date, the same for every request of a day (what makes caching it for a day correct).

Run: gunicorn app:app --workers=5 --worker-class=sync --bind=unix:api.sock
(the seed used meinheld's worker, which no longer builds on current Pythons; sync is gunicorn's
default and what bench/seed004.sh runs).
"""

import datetime

from flask import Flask, jsonify

app = Flask(__name__)

# The marker bench/seed004.sh looks for in a body to tell the API's answer from anything else.
MARKER = '"service":"seed004-api"'


def payload(path):
    day = datetime.date.today().isoformat()
    items = [
        {
            "id": i,
            "name": f"resource-{i:02d}",
            "price": round(9.99 + i * 1.25, 2),
            "in_stock": i % 3 != 0,
            "updated": day,
        }
        for i in range(1, 9)
    ]
    return {
        "service": "seed004-api",
        "path": path,
        "date": day,
        "count": len(items),
        "items": items,
    }


@app.route("/resource")
def resource():
    return jsonify(payload("/resource"))


@app.route("/api-endpoint/", defaults={"sub": ""})
@app.route("/api-endpoint/<path:sub>")
def api_endpoint(sub):
    return jsonify(payload("/api-endpoint/" + sub))
