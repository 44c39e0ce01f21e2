"""What a new user's first script does with the client openapi-python-client generates from
docs/openapi.json: create an endpoint, read a request back. test/generated-clients.test.ts runs it
with the generated package on its path and reads the JSON line it prints."""

import json
import os

from relay_client import AuthenticatedClient
from relay_client.api.endpoints import create_endpoint
from relay_client.api.request_log import get_request
from relay_client.models import CreateEndpointAnswer, CreateEndpointBody, CreateEndpointBodyTargetsItem, Request

client = AuthenticatedClient(base_url=os.environ["RELAY_CONTROL_URL"], token=os.environ["RELAY_TOKEN"])
project = os.environ["RELAY_PROJECT"]

created = create_endpoint.sync(
    project=project,
    line="v1",
    client=client,
    body=CreateEndpointBody(
        path="from-python",
        targets=[CreateEndpointBodyTargetsItem(name="receiver", target_url=os.environ["RELAY_TARGET_URL"])],
    ),
)
assert isinstance(created, CreateEndpointAnswer), created

read = get_request.sync(project=project, request_id=os.environ["RELAY_REQUEST_ID"], client=client)
assert isinstance(read, Request), read

print(json.dumps({"endpoint": created.path, "request": read.request_id, "status": str(read.status)}))
