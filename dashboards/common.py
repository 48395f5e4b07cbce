"""Names every part of the Grafana side shares: the datasource the dashboards and alert rules
query, the folder they live in, the dashboards' uids, and where docker-compose mounts the files
in the Grafana container. Change one here and the generator, the provisioning files, the push
command and docker-compose follow (tests check they agree)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
JSON_DIR = HERE / "json"  # generated dashboard JSON, checked in
PROVISIONING_DIR = HERE / "provisioning"  # Grafana's provisioning tree (datasources/, dashboards/, alerting/)

DATASOURCE_TYPE = "grafana-postgresql-datasource"  # Grafana >= 10.2's id of the PostgreSQL plugin
DATASOURCE_UID = "replimon-pg"
DATASOURCE_NAME = "replimon PostgreSQL"
DATASOURCE = {"type": DATASOURCE_TYPE, "uid": DATASOURCE_UID}

FOLDER_UID = "replimon"
FOLDER_TITLE = "replimon"

DASHBOARD_UIDS = {
    "fleet": "replimon-fleet",
    "group": "replimon-group",
    "alerts": "replimon-alerts",
    "pipeline": "replimon-pipeline",
}

# In the Grafana container (docker-compose.yml mounts the two directories there).
CONTAINER_PROVISIONING = "/etc/grafana/provisioning"
CONTAINER_DASHBOARDS = "/var/lib/grafana/dashboards/replimon"

# The PostgreSQL the provisioned datasource points at (docker-compose's service and credentials).
COMPOSE_PG = {"host": "postgres:5432", "database": "replimon", "user": "replimon", "password": "replimon"}
