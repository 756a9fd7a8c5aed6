"""The WebDAV front door: ``memfs serve webdav`` (``server``), the provider WsgiDAV calls
(``provider``) and the way from its threads into the workspace (``sessions``)."""
