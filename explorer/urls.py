"""The explorer's pages (CONTRACT "Browser") and the fragments and actions behind them: one
module of :mod:`explorer.pages` per page."""

from __future__ import annotations

from django.urls import include, path

from explorer.pages import (
    cell,
    cell_actions,
    cell_graph,
    diff,
    exports,
    frontier,
    members,
    namespaces,
    observations,
    operations,
    outcome,
    read,
    review,
    webhooks,
)

CELL = "ns/<slug:ns>/cells/<str:key>/"

explorer_patterns = [
    path("", namespaces.index, name="index"),
    path("glossary/", namespaces.glossary, name="glossary"),
    path("ns/<slug:ns>/", frontier.frontier, name="frontier"),
    path("ns/<slug:ns>/live/", namespaces.live, name="live"),
    path(CELL, cell.cell, name="cell"),
    path(f"{CELL}panel/", cell.cell_panel, name="cell_panel"),
    path(f"{CELL}graph/", cell_graph.cell_graph, name="cell_graph"),
    path(f"{CELL}timeline/", cell_graph.cell_timeline, name="cell_timeline"),
    path(f"{CELL}history/", cell.cell_history, name="cell_history"),
    path(f"{CELL}versions/", cell.cell_version_choices, name="cell_version_choices"),
    path(f"{CELL}versions/<int:version_id>/", cell.cell_version, name="cell_version"),
    path(f"{CELL}operations/", cell_actions.cell_operate, name="cell_operate"),
    path(f"{CELL}operations/preview/", outcome.cell_preview, name="cell_preview"),
    path(f"{CELL}erase/", cell_actions.cell_erase_page, name="cell_erase"),
    path("ns/<slug:ns>/observations/", observations.observation_add, name="observation_add"),
    path("ns/<slug:ns>/observations/list/", observations.observations_fragment,
         name="observations"),
    path("ns/<slug:ns>/observations/<int:evidence_id>/", observations.observation,
         name="observation"),
    path("ns/<slug:ns>/observations/<int:evidence_id>/retry/",
         observations.observation_retry_view, name="observation_retry"),
    path("ns/<slug:ns>/operations/", operations.operations, name="operations"),
    path("ns/<slug:ns>/operations/export.<str:fmt>", exports.export_log, name="export_log"),
    path("ns/<slug:ns>/operations/<int:operation_id>/undo/", review.undo, name="undo"),
    path("ns/<slug:ns>/review/", review.review, name="review"),
    path("ns/<slug:ns>/export/frontier.<str:fmt>", exports.export_frontier,
         name="export_frontier"),
    path(f"{CELL}diff/", diff.diff, name="diff"),
    path(f"{CELL}diff/versions/", diff.diff_versions, name="diff_versions"),
    path(f"{CELL}export.<str:fmt>", exports.export_history, name="export_history"),
    path("ns/<slug:ns>/read/", read.read_compare, name="read"),
    path("ns/<slug:ns>/access/", members.access_page, name="access"),
    path("ns/<slug:ns>/webhooks/", webhooks.webhooks_page, name="webhooks"),
    path("ns/<slug:ns>/webhooks/new/", webhooks.webhook_add, name="webhook_add"),
    path("ns/<slug:ns>/webhooks/<int:endpoint_id>/delete/", webhooks.webhook_remove,
         name="webhook_delete"),
    path("ns/<slug:ns>/webhooks/<int:endpoint_id>/resume/", webhooks.webhook_resume_view,
         name="webhook_resume"),
    path("ns/<slug:ns>/access/tokens/", members.token_add, name="token_add"),
    path("ns/<slug:ns>/access/tokens/<int:token_id>/revoke/", members.token_remove,
         name="token_revoke"),
    path("ns/<slug:ns>/access/members/", members.member_set, name="member_set"),
    path("ns/<slug:ns>/access/delete/", members.namespace_remove, name="namespace_delete"),
    path("ns/<slug:ns>/access/members/<int:user_id>/remove/", members.member_remove,
         name="member_remove"),
]

urlpatterns = [
    # Django's auth views keep their global names (login, logout) for LOGIN_URL and templates;
    # password reset answers 404 unless email is configured (explorer.account_views).
    path("accounts/", include("explorer.account_views")),
    path("", include((explorer_patterns, "explorer"))),
]
