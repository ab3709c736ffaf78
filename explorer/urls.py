"""The explorer's pages (CONTRACT "Browser") and the fragments and actions behind them."""

from __future__ import annotations

from django.urls import include, path

from explorer import access_views, cell_views, views, workbench

explorer_patterns = [
    path("", views.index, name="index"),
    path("glossary/", views.glossary, name="glossary"),
    path("ns/<slug:ns>/", views.frontier, name="frontier"),
    path("ns/<slug:ns>/live/", views.live, name="live"),
    path("ns/<slug:ns>/cells/<str:key>/", cell_views.cell, name="cell"),
    path("ns/<slug:ns>/cells/<str:key>/panel/", cell_views.cell_panel, name="cell_panel"),
    path("ns/<slug:ns>/cells/<str:key>/graph/", cell_views.cell_graph_json, name="cell_graph"),
    path("ns/<slug:ns>/cells/<str:key>/timeline/", cell_views.cell_timeline, name="cell_timeline"),
    path("ns/<slug:ns>/cells/<str:key>/history/", cell_views.cell_history, name="cell_history"),
    path("ns/<slug:ns>/cells/<str:key>/versions/", cell_views.cell_version_choices,
         name="cell_version_choices"),
    path("ns/<slug:ns>/cells/<str:key>/versions/<int:version_id>/", cell_views.cell_version,
         name="cell_version"),
    path("ns/<slug:ns>/cells/<str:key>/operations/", views.cell_operate, name="cell_operate"),
    path("ns/<slug:ns>/cells/<str:key>/erase/", views.cell_erase_page, name="cell_erase"),
    path("ns/<slug:ns>/observations/", views.observation_add, name="observation_add"),
    path("ns/<slug:ns>/observations/list/", views.observations_fragment, name="observations"),
    path("ns/<slug:ns>/observations/<int:evidence_id>/", views.observation, name="observation"),
    path("ns/<slug:ns>/observations/<int:evidence_id>/retry/", views.observation_retry_view,
         name="observation_retry"),
    path("ns/<slug:ns>/operations/", views.operations, name="operations"),
    path("ns/<slug:ns>/operations/export.<str:fmt>", workbench.export_log, name="export_log"),
    path("ns/<slug:ns>/operations/<int:operation_id>/undo/", workbench.undo, name="undo"),
    path("ns/<slug:ns>/review/", workbench.review, name="review"),
    path("ns/<slug:ns>/export/frontier.<str:fmt>", workbench.export_frontier,
         name="export_frontier"),
    path("ns/<slug:ns>/cells/<str:key>/diff/", workbench.diff, name="diff"),
    path("ns/<slug:ns>/cells/<str:key>/export.<str:fmt>", workbench.export_history,
         name="export_history"),
    path("ns/<slug:ns>/read/", views.read_compare, name="read"),
    path("ns/<slug:ns>/access/", access_views.access_page, name="access"),
    path("ns/<slug:ns>/access/tokens/", access_views.token_add, name="token_add"),
    path("ns/<slug:ns>/access/tokens/<int:token_id>/revoke/", access_views.token_remove,
         name="token_revoke"),
    path("ns/<slug:ns>/access/members/", access_views.member_set, name="member_set"),
    path("ns/<slug:ns>/access/members/<int:user_id>/remove/", access_views.member_remove,
         name="member_remove"),
]

urlpatterns = [
    # Django's auth views keep their global names (login, logout) for LOGIN_URL and templates;
    # password reset answers 404 unless email is configured (explorer.account_views).
    path("accounts/", include("explorer.account_views")),
    path("", include((explorer_patterns, "explorer"))),
]
